package cycle

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// runningOn books a one-GPU workload on GPU gpu of node n and returns it
// as Running.
func runningOn(t *testing.T, c *placement.Cluster, id, queue string, prio int32, n, gpu int, started time.Time) Running {
	t.Helper()
	w := whole(id, 1)
	d := placement.Decision{Node: n, GPUs: []int{gpu}}
	if err := c.Apply(&w.Parts[0], d); err != nil {
		t.Fatal(err)
	}
	return Running{ID: id, Queue: queue, Priority: prio, Started: started, Parts: w.Parts, Decisions: []placement.Decision{d}}
}

// victims lists each outcome's victims as "id/kind".
func victims(outs []Outcome) map[string][]string {
	m := map[string][]string{}
	for _, o := range outs {
		for _, v := range o.Victims {
			m[o.Workload] = append(m[o.Workload], v.ID+"/"+v.Kind.String())
		}
	}
	return m
}

func TestPreemptWithinAQueue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prio       int32
		minRuntime time.Duration
		want       map[string][]string
	}{
		{"a higher priority stops the lowest, most recent first", 5, 0, map[string][]string{"p": {"low-new/priority"}}},
		{"an equal priority stops nothing", 0, 0, map[string][]string{}},
		{"the minimum runtime protects the young", 5, 30 * time.Minute, map[string][]string{"p": {"low-old/priority"}}},
		{"one awaiting its victims names no more", 5, 0, map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 3)}}
			run := []Running{
				runningOn(t, c, "low-old", "", 0, 0, 0, t0.Add(-2*time.Hour)),
				runningOn(t, c, "low-new", "", 0, 0, 1, t0.Add(-10*time.Minute)),
				runningOn(t, c, "high", "", 10, 0, 2, t0.Add(-3*time.Hour)),
			}
			before := free(c)
			p := whole("p", 1)
			p.Priority = tc.prio
			p.AwaitingVictims = tc.name == "one awaiting its victims names no more"
			outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{p}, Running: run,
				Preemption: &Preemption{Now: t0, MinRuntime: tc.minRuntime}})
			if err != nil {
				t.Fatal(err)
			}
			if got := victims(outs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("victims %v, want %v (outcomes %+v)", got, tc.want, outs)
			}
			if outs[0].Status != NoFit {
				t.Errorf("status %v: the preemptor waits for its victims to stop", outs[0].Status)
			}
			if !reflect.DeepEqual(free(c), before) {
				t.Errorf("planning preemption changed the cluster: %v, want %v", free(c), before)
			}
		})
	}
}

// TestReclaimFreesExactlyTheLentShare: queue lent owns 4 GPUs while it is
// guaranteed 2; queue owed, guaranteed 2, asks 3. Reclaim stops exactly two
// of lent's workloads (the most recent), and owed's third waits.
func TestReclaimFreesExactlyTheLentShare(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 4)}}
	var run []Running
	for i, id := range []string{"l0", "l1", "l2", "l3"} {
		run = append(run, runningOn(t, c, id, "lent", 0, 0, i, t0.Add(-time.Duration(10-i)*time.Hour)))
	}
	two := queueing.Resources{GPUMilli: 2000}
	qs := tree(t, queueing.Queue{Name: "lent", Guaranteed: two}, queueing.Queue{Name: "owed", Guaranteed: two})
	pend := []Workload{inQueue(whole("o0", 1), "owed"), inQueue(whole("o1", 1), "owed"), inQueue(whole("o2", 1), "owed")}
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Pending: pend, Running: run, Preemption: &Preemption{Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"o0": {"l3/reclaim"}, "o1": {"l2/reclaim"}}
	if got := victims(outs); !reflect.DeepEqual(got, want) {
		t.Fatalf("victims %v, want %v (outcomes %+v)", got, want, outs)
	}
	// Without reclaim, nothing is stopped across queues.
	outs, err = Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Pending: pend, Running: run, Preemption: &Preemption{Now: t0, NoReclaim: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := victims(outs); len(got) != 0 {
		t.Fatalf("with NoReclaim: victims %v, want none", got)
	}
}

// TestPreemptSparesAGangAtItsMinimum: members of a gang at its minimum are
// never victims; its surplus members are.
func TestPreemptSparesAGangAtItsMinimum(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 3)}}
	var run []Running
	for i, id := range []string{"g0", "g1", "g2"} {
		r := runningOn(t, c, id, "", 0, 0, i, t0.Add(-time.Duration(5-i)*time.Hour))
		r.Gang = "g"
		run = append(run, r)
	}
	p := whole("p", 2)
	p.Priority = 1
	for _, tc := range []struct {
		min  int
		want map[string][]string
	}{
		{3, map[string][]string{}},
		{2, map[string][]string{}}, // one surplus member: two GPUs cannot be freed
		{1, map[string][]string{"p": {"g2/priority", "g1/priority"}}},
	} {
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{p}, Running: run,
			Gangs: map[string]Gang{"g": {MinMember: tc.min, Running: 3}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := victims(outs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("gang minimum %d: victims %v, want %v", tc.min, got, tc.want)
		}
	}
}

// TestTwoPreemptorsKeepAGangAtItsMinimum: gang g (minimum 2) runs three
// members on two nodes, so one is surplus. Two waiting workloads of one
// cycle each need one GPU; only one of them may take a member of g, or
// the gang would fall below its minimum.
func TestTwoPreemptorsKeepAGangAtItsMinimum(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 1)}}
	var run []Running
	for i, at := range [][2]int{{0, 0}, {0, 1}, {1, 0}} {
		r := runningOn(t, c, []string{"g0", "g1", "g2"}[i], "", 0, at[0], at[1], t0.Add(-time.Duration(5-i)*time.Hour))
		r.Gang = "g"
		run = append(run, r)
	}
	p, q := whole("p", 1), whole("q", 1)
	p.Priority, q.Priority = 1, 1
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{p, q}, Running: run,
		Gangs: map[string]Gang{"g": {MinMember: 2, Running: 3}}, Preemption: &Preemption{Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range outs {
		n += len(o.Victims)
	}
	if n != 1 {
		t.Fatalf("%d members of g named victims in one cycle, want 1 (its one surplus member): %v", n, victims(outs))
	}
}

// gangOf returns n one-GPU members of gang key with priority prio.
func gangOf(key string, n int, prio int32) []Workload {
	var ws []Workload
	for i := range n {
		w := whole(key+strconv.Itoa(i), 1)
		w.Gang, w.Priority = key, prio
		ws = append(ws, w)
	}
	return ws
}

// TestGangPreempts: a gang that does not fit names the victims that let
// the members it still needs fit together, across nodes, on the first
// member's outcome; nothing is booked, and the cluster is left as found.
func TestGangPreempts(t *testing.T) {
	// Nodes a and b, two GPUs each: a holds low-priority l0 and l1, b holds
	// a high-priority h and a low l2. A gang of three one-GPU members at
	// priority 5 needs l0, l1 and l2 stopped (not h).
	setup := func(t *testing.T) (*placement.Cluster, []Running) {
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
		return c, []Running{
			runningOn(t, c, "l0", "", 0, 0, 0, t0.Add(-3*time.Hour)),
			runningOn(t, c, "l1", "", 0, 0, 1, t0.Add(-2*time.Hour)),
			runningOn(t, c, "h", "", 10, 1, 0, t0.Add(-3*time.Hour)),
			runningOn(t, c, "l2", "", 0, 1, 1, t0.Add(-1*time.Hour)),
		}
	}
	t.Run("across nodes", func(t *testing.T) {
		c, run := setup(t)
		before := free(c)
		members := gangOf("g", 3, 5)
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: members, Running: run,
			Gangs: map[string]Gang{"g": {MinMember: 3}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 3 {
			t.Fatalf("%d outcomes, want 3", len(outs))
		}
		for _, o := range outs {
			if o.Status != GangMisfit {
				t.Errorf("%s: %v, want gang-misfit (the gang waits for its victims)", o.Workload, o.Status)
			}
		}
		got := map[string]int{}
		for _, v := range outs[0].Victims {
			got[v.ID] = v.Node
		}
		if want := map[string]int{"l0": 0, "l1": 0, "l2": 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("victims (by node) %v, want %v", got, want)
		}
		if len(outs[1].Victims)+len(outs[2].Victims) != 0 {
			t.Error("victims named on more than the first member's outcome")
		}
		if !reflect.DeepEqual(free(c), before) {
			t.Errorf("planning the gang's preemption changed the cluster: %v, want %v", free(c), before)
		}
	})
	t.Run("nothing when the gang cannot fit even so", func(t *testing.T) {
		c, run := setup(t)
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: gangOf("g", 4, 5), Running: run,
			Gangs: map[string]Gang{"g": {MinMember: 4}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := victims(outs); len(got) != 0 {
			t.Errorf("victims %v for a gang that needs h's GPU too, want none", got)
		}
	})
	t.Run("a member awaiting victims plans no more", func(t *testing.T) {
		c, run := setup(t)
		members := gangOf("g", 3, 5)
		members[1].AwaitingVictims = true
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: members, Running: run,
			Gangs: map[string]Gang{"g": {MinMember: 3}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := victims(outs); len(got) != 0 {
			t.Errorf("victims %v while a member awaits earlier ones, want none", got)
		}
	})
	t.Run("only the members still needed", func(t *testing.T) {
		// Two members of g already run (on a): the gang needs one more,
		// and stops one workload for it, never its own members.
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
		g0 := runningOn(t, c, "g-run0", "", 5, 0, 0, t0.Add(-time.Hour))
		g1 := runningOn(t, c, "g-run1", "", 5, 0, 1, t0.Add(-time.Hour))
		g0.Gang, g1.Gang = "g", "g"
		run := []Running{g0, g1, runningOn(t, c, "l0", "", 0, 1, 0, t0.Add(-time.Hour)), runningOn(t, c, "l1", "", 0, 1, 1, t0.Add(-2*time.Hour))}
		members := gangOf("g", 2, 5)
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: members, Running: run,
			Gangs: map[string]Gang{"g": {MinMember: 3, Running: 2}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := victims(outs), map[string][]string{"g0": {"l0/priority"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("victims %v, want %v (one more member needed; the most recent low workload)", got, want)
		}
	})
	t.Run("another gang is not taken below its minimum", func(t *testing.T) {
		// Gang o (minimum 1) runs a member on each of two one-GPU nodes:
		// one is surplus, so a gang of two cannot have both GPUs.
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 1), gpus("b", 1)}}
		o0, o1 := runningOn(t, c, "o0", "", 0, 0, 0, t0.Add(-time.Hour)), runningOn(t, c, "o1", "", 0, 1, 0, t0.Add(-time.Hour))
		o0.Gang, o1.Gang = "o", "o"
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: gangOf("g", 2, 5), Running: []Running{o0, o1},
			Gangs: map[string]Gang{"g": {MinMember: 2}, "o": {MinMember: 1, Running: 2}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := victims(outs); len(got) != 0 {
			t.Errorf("victims %v: gang o would fall below its minimum, want none", got)
		}
	})
	t.Run("reclaim for a gang below its queue's guarantee", func(t *testing.T) {
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
		var run []Running
		for i, id := range []string{"l0", "l1", "l2", "l3"} {
			run = append(run, runningOn(t, c, id, "lent", 0, i/2, i%2, t0.Add(-time.Duration(10-i)*time.Hour)))
		}
		two := queueing.Resources{GPUMilli: 2000}
		qs := tree(t, queueing.Queue{Name: "lent", Guaranteed: two}, queueing.Queue{Name: "owed", Guaranteed: two})
		members := gangOf("g", 2, 0)
		for i := range members {
			members[i] = inQueue(members[i], "owed")
		}
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Pending: members, Running: run,
			Gangs: map[string]Gang{"g": {MinMember: 2}}, Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		got := victims(outs)["g0"]
		if len(got) != 2 || got[0][len(got[0])-len("reclaim"):] != "reclaim" {
			t.Errorf("victims %v, want two of lent's workloads reclaimed for owed's gang", got)
		}
	})
}

// TestPreemptProtected: a workload that names no victims only because the
// minimum runtime protects them gets, as Protected, the victims it would
// name without it; otherwise Protected is empty.
func TestPreemptProtected(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prio       int32
		minRuntime time.Duration
		awaiting   bool
		victims    []string
		protected  []string
	}{
		{"every candidate too young: the one it would stop", 5, 3 * time.Hour, false, nil, []string{"low-new/priority"}},
		{"one old enough: a victim, nothing protected", 5, 30 * time.Minute, false, []string{"low-old/priority"}, nil},
		{"no minimum runtime: nothing protected", 0, 0, false, nil, nil},
		{"no victim even unprotected: nothing protected", 0, 3 * time.Hour, false, nil, nil},
		{"awaiting its victims: nothing planned", 5, 3 * time.Hour, true, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 3)}}
			run := []Running{
				runningOn(t, c, "low-old", "", 0, 0, 0, t0.Add(-2*time.Hour)),
				runningOn(t, c, "low-new", "", 0, 0, 1, t0.Add(-10*time.Minute)),
				runningOn(t, c, "high", "", 10, 0, 2, t0.Add(-3*time.Hour)),
			}
			before := free(c)
			p := whole("p", 1)
			p.Priority, p.AwaitingVictims = tc.prio, tc.awaiting
			outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{p}, Running: run,
				Preemption: &Preemption{Now: t0, MinRuntime: tc.minRuntime}})
			if err != nil {
				t.Fatal(err)
			}
			named := func(vs []Victim) []string {
				var out []string
				for _, v := range vs {
					out = append(out, v.ID+"/"+v.Kind.String())
				}
				return out
			}
			if got := named(outs[0].Victims); !reflect.DeepEqual(got, tc.victims) {
				t.Errorf("victims %v, want %v", got, tc.victims)
			}
			if got := named(outs[0].Protected); !reflect.DeepEqual(got, tc.protected) {
				t.Errorf("protected %v, want %v", got, tc.protected)
			}
			if !reflect.DeepEqual(free(c), before) {
				t.Errorf("planning preemption changed the cluster: %v, want %v", free(c), before)
			}
		})
	}
}
