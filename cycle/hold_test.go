package cycle

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

// ledgerReserver is a Reserver that holds one unit of a per-node budget
// (as a node's free devices of another driver would be) and records what
// it holds, so a test sees exactly what a cycle kept.
type ledgerReserver struct {
	budget map[int]int     // per node: holds left
	held   map[string]int  // workload -> node held on
	calls  []string        // "reserve w@n", "unreserve w@n"
	refuse map[string]bool // workloads refused outright (an error)
}

func (l *ledgerReserver) Reserve(w *Workload, d []placement.Decision) (string, error) {
	n := d[0].Node
	l.calls = append(l.calls, fmt.Sprintf("reserve %s@%d", w.ID, n))
	if l.refuse[w.ID] {
		return "", errors.New("claim is malformed")
	}
	if l.budget[n] == 0 {
		return "no device of the other driver free", nil
	}
	l.budget[n]--
	l.held[w.ID] = n
	return "", nil
}

func (l *ledgerReserver) Unreserve(w *Workload, d []placement.Decision) {
	n := d[0].Node
	l.calls = append(l.calls, fmt.Sprintf("unreserve %s@%d", w.ID, n))
	l.budget[n]++
	delete(l.held, w.ID)
}

func withHold(w Workload, r Reserver) Workload { w.Reserver = r; return w }

func TestReserverHoldsInsideTheStep(t *testing.T) {
	t.Run("a node the reserver refuses is ruled out and counted", func(t *testing.T) {
		l := &ledgerReserver{budget: map[int]int{0: 0, 1: 1}, held: map[string]int{}}
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{
			withHold(whole("p", 1), l), withHold(whole("q", 1), l),
		}})
		if err != nil {
			t.Fatal(err)
		}
		if outs[0].Status != Placed || outs[0].Decisions[0].Node != 1 || l.held["p"] != 1 {
			t.Fatalf("p: %+v, held %v", outs[0], l.held)
		}
		// q fits both nodes' GPUs, but neither node can hold its device now.
		if outs[1].Status != NoFit || outs[1].Rejections["no device of the other driver free"] != 2 {
			t.Fatalf("q: %+v", outs[1])
		}
		if f := freeMilli(c); f[0] != 2000 || f[1] != 1000 {
			t.Fatalf("free compute %v: q booked nothing, p one GPU of b", f)
		}
	})
	t.Run("a gang that does not fit whole gives back its members' holds", func(t *testing.T) {
		l := &ledgerReserver{budget: map[int]int{0: 5}, held: map[string]int{}}
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
		g := []Workload{
			withHold(inGang(whole("g1", 1), "g"), l), withHold(inGang(whole("g2", 1), "g"), l), withHold(inGang(whole("g3", 1), "g"), l),
		}
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: g, Gangs: map[string]Gang{"g": {MinMember: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.Status != GangMisfit {
				t.Fatalf("%s: %v, want gang-misfit", o.Workload, o.Status)
			}
		}
		if len(l.held) != 0 || l.budget[0] != 5 {
			t.Fatalf("holds kept after the gang was discarded: %v, budget %d; calls %v", l.held, l.budget[0], l.calls)
		}
		want := []string{"reserve g1@0", "reserve g2@0", "unreserve g2@0", "unreserve g1@0"}
		if !slices.Equal(l.calls, want) {
			t.Fatalf("calls %v, want %v (released last first)", l.calls, want)
		}
		if f := freeMilli(c); f[0] != 2000 {
			t.Fatalf("bookings kept: free %v", f)
		}
	})
	t.Run("a gang that fits keeps every hold", func(t *testing.T) {
		l := &ledgerReserver{budget: map[int]int{0: 5}, held: map[string]int{}}
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
		g := []Workload{withHold(inGang(whole("g1", 1), "g"), l), withHold(inGang(whole("g2", 1), "g"), l)}
		if _, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: g, Gangs: map[string]Gang{"g": {MinMember: 2}}}); err != nil {
			t.Fatal(err)
		}
		if len(l.held) != 2 || l.budget[0] != 3 {
			t.Fatalf("held %v, budget %d", l.held, l.budget[0])
		}
	})
	t.Run("an error refuses the workload and holds nothing", func(t *testing.T) {
		l := &ledgerReserver{budget: map[int]int{0: 5}, held: map[string]int{}, refuse: map[string]bool{"bad": true}}
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{withHold(whole("bad", 1), l)}})
		if err != nil {
			t.Fatal(err)
		}
		if f := freeMilli(c); outs[0].Status != Invalid || outs[0].Err == nil || f[0] != 2000 {
			t.Fatalf("%+v, free %v", outs[0], f)
		}
	})
	t.Run("what-if placements never call it", func(t *testing.T) {
		l := &ledgerReserver{budget: map[int]int{0: 5}, held: map[string]int{}}
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
		if o, err := Plan(c, withHold(whole("p", 1), l), bestfit(t)); err != nil || o.Status != Placed {
			t.Fatalf("plan: %+v %v", o, err)
		}
		res := &Reservation{What: "r", Nodes: map[int]bool{0: true}, For: []Workload{withHold(whole("r", 1), l)}}
		if ok, err := res.Fits(c, bestfit(t)); err != nil || !ok {
			t.Fatalf("fits: %v %v", ok, err)
		}
		if len(l.calls) != 0 {
			t.Fatalf("what-if placements called the reserver: %v", l.calls)
		}
	})
}

// freeMilli is each node's free GPU compute.
func freeMilli(c *placement.Cluster) []int64 {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		for _, g := range n.GPUs {
			out[i] += g.FreeMilli
		}
	}
	return out
}
