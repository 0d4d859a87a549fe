package cycle

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// TestNominationHoldsTheRoom: nodes a and b, two GPUs each. Unless a case
// says otherwise, p (priority 5, one GPU) named victims on a, which have
// stopped: a's GPU 0 is free, its GPU 1 runs x, b runs y0 and y1 (all at
// priority 10: never victims). Each case says what each workload became:
// "a"/"b" placed there, "held" fits nowhere because a nomination holds the
// room it would take, "no-fit" fits nowhere at all.
func TestNominationHoldsTheRoom(t *testing.T) {
	at := func(w Workload, p int32) Workload { w.Priority = p; return w }
	p := at(whole("p", 1), 5)
	nomP := Nomination{What: "pod p", For: []Nominee{{Workload: p, Node: 0}}}
	// base books x on a's GPU 1 unless a is to be left free, and y0, y1 on b.
	base := func(t *testing.T, c *placement.Cluster, aFree bool) []Running {
		var run []Running
		if !aFree {
			run = append(run, runningOn(t, c, "x", "", 10, 0, 1, t0.Add(-time.Hour)))
		}
		return append(run, runningOn(t, c, "y0", "", 10, 1, 0, t0.Add(-time.Hour)), runningOn(t, c, "y1", "", 10, 1, 1, t0.Add(-time.Hour)))
	}
	excludeA := func(w Workload) Workload {
		w.Exclude = func(n int) string {
			if n == 0 {
				return "tainted"
			}
			return ""
		}
		return w
	}
	for _, tc := range []struct {
		name    string
		snap    func(t *testing.T, c *placement.Cluster) Snapshot
		want    map[string]string
		victims map[string][]string
	}{
		{"a lower priority served first does not take the room", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q", 1), 0), p}}
		}, map[string]string{"q": "held", "p": "a"}, nil},
		{"nor does an equal one", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q", 1), 5), p}}
		}, map[string]string{"q": "held", "p": "a"}, nil},
		{"a higher priority takes it", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q", 1), 6), p}}
		}, map[string]string{"q": "a", "p": "no-fit"}, nil},
		{"the room beyond the hold is the others'", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, true), Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q", 1), 0), p}}
		}, map[string]string{"q": "a", "p": "a"}, nil},
		{"placed, the preemptor has used its hold up", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, true), Nominations: []Nomination{nomP}, Pending: []Workload{p, at(whole("q", 1), 0)}}
		}, map[string]string{"p": "a", "q": "a"}, nil},
		{"tried and not placed, its hold ends", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{excludeA(p), at(whole("q", 1), 0)}}
		}, map[string]string{"p": "no-fit", "q": "a"}, nil},
		{"an equal request after the hold ended is tried again", func(t *testing.T, c *placement.Cluster) Snapshot {
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q1", 1), 0), excludeA(p), at(whole("q2", 1), 0)}}
		}, map[string]string{"q1": "held", "p": "no-fit", "q2": "a"}, nil},
		{"awaiting its victims, the hold stays", func(t *testing.T, c *placement.Cluster) Snapshot {
			w := excludeA(p)
			w.AwaitingVictims = true
			return Snapshot{Running: base(t, c, false), Nominations: []Nomination{nomP}, Pending: []Workload{w, at(whole("q", 1), 0)}}
		}, map[string]string{"p": "no-fit", "q": "held"}, nil},
		{"its victims still running are taken as stopped", func(t *testing.T, c *placement.Cluster) Snapshot {
			// p asks both of a's GPUs; its victim v still runs on GPU 0.
			p2 := at(whole("p", 2), 5)
			p2.AwaitingVictims = true
			run := append(base(t, c, true), runningOn(t, c, "v", "", 0, 0, 0, t0.Add(-time.Hour)))
			run[len(run)-1].Stopping = true
			return Snapshot{Running: run, Nominations: []Nomination{{What: "pod p", For: []Nominee{{Workload: p2, Node: 0}}, Victims: []string{"v"}}},
				Pending: []Workload{at(whole("q", 1), 0), p2}}
		}, map[string]string{"q": "held", "p": "no-fit"}, nil},
		// The members take the gang's room in the order the policy picks.
		{"a gang's room on each of its nodes", func(t *testing.T, c *placement.Cluster) Snapshot {
			run := []Running{runningOn(t, c, "x", "", 10, 0, 1, t0.Add(-time.Hour)), runningOn(t, c, "y", "", 10, 1, 1, t0.Add(-time.Hour))}
			g := gangOf("g", 2, 5)
			return Snapshot{Running: run, Gangs: map[string]Gang{"g": {MinMember: 2}},
				Nominations: []Nomination{{What: "gang g", For: []Nominee{{Workload: g[0], Node: 0}, {Workload: g[1], Node: 1}}}},
				Pending:     []Workload{at(whole("q1", 1), 0), at(whole("q2", 1), 0), g[0], g[1]}}
		}, map[string]string{"q1": "held", "q2": "held", "g0": "b", "g1": "a"}, nil},
		{"a room whose nomination does not fit holds nothing", func(t *testing.T, c *placement.Cluster) Snapshot {
			// p's room was taken: a's GPU 0 runs z.
			run := append(base(t, c, false), runningOn(t, c, "z", "", 10, 0, 0, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("q", 1), 0), p}}
		}, map[string]string{"q": "no-fit", "p": "no-fit"}, nil},
		{"a plan of this run holds its room for the rest of it", func(t *testing.T, c *placement.Cluster) Snapshot {
			// p asks two GPUs and names v (a's GPU 0); q must not take GPU 1.
			run := append(base(t, c, true), runningOn(t, c, "v", "", 0, 0, 0, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Preemption: &Preemption{Now: t0}, Pending: []Workload{at(whole("p", 2), 5), at(whole("q", 1), 0)}}
		}, map[string]string{"p": "no-fit", "q": "held"}, map[string][]string{"p": {"v/priority"}}},
		{"no victims are freed into the room held", func(t *testing.T, c *placement.Cluster) Snapshot {
			// w (two GPUs) could stop v on a's GPU 1, but needs p's GPU 0 too.
			run := append(base(t, c, true), runningOn(t, c, "v", "", 0, 0, 1, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Preemption: &Preemption{Now: t0}, Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("w", 2), 1)}}
		}, map[string]string{"w": "no-fit"}, nil},
		{"once the hold ended, an equal workload may free victims there", func(t *testing.T, c *placement.Cluster) Snapshot {
			run := append(base(t, c, true), runningOn(t, c, "v", "", 0, 0, 1, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Preemption: &Preemption{Now: t0}, Nominations: []Nomination{nomP},
				Pending: []Workload{at(whole("w1", 2), 1), excludeA(p), at(whole("w", 2), 1)}}
		}, map[string]string{"w1": "no-fit", "p": "no-fit", "w": "no-fit"}, map[string][]string{"w": {"v/priority"}}},
		{"a higher priority may free victims into it", func(t *testing.T, c *placement.Cluster) Snapshot {
			run := append(base(t, c, true), runningOn(t, c, "v", "", 0, 0, 1, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Preemption: &Preemption{Now: t0}, Nominations: []Nomination{nomP}, Pending: []Workload{at(whole("w", 2), 9)}}
		}, map[string]string{"w": "no-fit"}, map[string][]string{"w": {"v/priority"}}},
		{"no other workload names its victims", func(t *testing.T, c *placement.Cluster) Snapshot {
			// p's victim v still runs on a's GPU 0 (not yet seen stopping);
			// h could stop it, but it is p's.
			w := p
			w.AwaitingVictims = true
			run := append(base(t, c, false), runningOn(t, c, "v", "", 0, 0, 0, t0.Add(-time.Hour)))
			return Snapshot{Running: run, Preemption: &Preemption{Now: t0}, Nominations: []Nomination{{What: "pod p", For: nomP.For, Victims: []string{"v"}}},
				Pending: []Workload{at(whole("h", 1), 9), w}}
		}, map[string]string{"h": "no-fit", "p": "no-fit"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
			s := tc.snap(t, c)
			s.Cluster, s.Policy = c, bestfit(t)
			before := free(c)
			outs, err := Run(s)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, o := range outs {
				switch {
				case o.Status == Placed:
					got[o.Workload] = c.Nodes[o.Decisions[0].Node].Name
				case o.Status == NoFit && o.Rejections["room held for pod p, which named victims there"]+o.Rejections["room held for gang g, which named victims there"]+o.Rejections["room held for p, which named victims there"] > 0:
					got[o.Workload] = "held"
				case o.Status == NoFit:
					got[o.Workload] = "no-fit"
				default:
					got[o.Workload] = o.Status.String() + ": " + o.Message
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if v := victims(outs); len(v)+len(tc.victims) > 0 && !reflect.DeepEqual(v, tc.victims) {
				t.Errorf("victims %v, want %v", v, tc.victims)
			}
			// Only the placements stay booked: every hold was what-if.
			for _, o := range outs {
				if o.Status != Placed {
					continue
				}
				w := find(s.Pending, o.Workload)
				for i := range w.Parts {
					if err := c.Release(&w.Parts[i], o.Decisions[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !reflect.DeepEqual(free(c), before) {
				t.Errorf("the cluster less the placements is %v, want %v as found", free(c), before)
			}
		})
	}
}

// TestNominationPlan: a workload or gang that names victims says where
// its plan puts it (Outcome.Plan), for the caller to nominate.
func TestNominationPlan(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 1), gpus("b", 1)}}
	run := []Running{runningOn(t, c, "l0", "", 0, 0, 0, t0.Add(-time.Hour)), runningOn(t, c, "l1", "", 0, 1, 0, t0.Add(-time.Hour))}
	g := gangOf("g", 2, 5)
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Running: run, Preemption: &Preemption{Now: t0},
		Gangs: map[string]Gang{"g": {MinMember: 2}}, Pending: g})
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for _, n := range outs[0].Plan {
		plan = append(plan, n.Workload.ID+"@"+c.Nodes[n.Node].Name)
	}
	if strings.Join(plan, " ") != "g0@a g1@b" || len(outs[1].Plan) != 0 {
		t.Errorf("plan %v (second member %v), want g0@a g1@b on the first member's outcome", plan, outs[1].Plan)
	}
}

// TestNoPlanMemoEndsWithARelease: queue A is guaranteed 2 of the 4 GPUs
// and holds them (a-low on node n1); B runs b1 and b2 on n2. w1 may not
// reclaim (A would go over its guarantee), h stops a-low by priority,
// which leaves A using 1 GPU: w2, equal to w1, may now reclaim from B.
func TestNoPlanMemoEndsWithARelease(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("n1", 2), gpus("n2", 2)}}
	aLow := whole("a-low", 2)
	aLow.Queue = "a"
	d := placement.Decision{Node: 0, GPUs: []int{0, 1}}
	if err := c.Apply(&aLow.Parts[0], d); err != nil {
		t.Fatal(err)
	}
	run := []Running{{ID: "a-low", Queue: "a", Started: t0.Add(-time.Hour), Parts: aLow.Parts, Decisions: []placement.Decision{d}},
		runningOn(t, c, "b1", "b", 0, 1, 0, t0.Add(-time.Hour)), runningOn(t, c, "b2", "b", 0, 1, 1, t0.Add(-time.Hour))}
	h := inQueue(whole("h", 1), "a")
	h.Priority = 5
	qs := tree(t, queueing.Queue{Name: "a", Guaranteed: queueing.Resources{GPUMilli: 2000}}, queueing.Queue{Name: "b"})
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Running: run, Preemption: &Preemption{Now: t0},
		Pending: []Workload{inQueue(whole("w1", 1), "a"), h, inQueue(whole("w2", 1), "a")}})
	if err != nil {
		t.Fatal(err)
	}
	v := victims(outs)
	if len(v["w1"]) != 0 || !reflect.DeepEqual(v["h"], []string{"a-low/priority"}) || len(v["w2"]) != 1 || !strings.HasSuffix(v["w2"][0], "/reclaim") {
		t.Errorf("victims %v, want none for w1, a-low for h, one reclaimed for w2", v)
	}
}
