package cycle

import (
	"reflect"
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
