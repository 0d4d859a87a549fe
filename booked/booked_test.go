package booked

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

func inv(name string, gpus int, cpu int64) inventory.Node {
	n := inventory.Node{Name: name, CPUMilli: cpu, MemoryMiB: 64 << 10}
	for i := range gpus {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: fmt.Sprintf("%s-gpu%d", name, i), Index: i, Model: "H200", MemoryMiB: 143771,
			Health: inventory.Healthy, NUMANode: -1})
	}
	return n
}

func share(node string, gpu int, milli int64) binding.Share {
	return binding.Share{UUID: fmt.Sprintf("%s-gpu%d", node, gpu), Index: gpu, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 4096, MemoryLimitMiB: 4096}
}

// normal is a node as compared: shape counts of zero are as none.
func normal(ns []placement.Node) []placement.Node {
	if len(ns) == 0 {
		return nil
	}
	out := slices.Clone(ns)
	for i := range out {
		s := maps.Clone(out[i].Shapes)
		maps.DeleteFunc(s, func(_ placement.GPUShape, n int) bool { return n == 0 })
		if len(s) == 0 {
			s = nil
		}
		out[i].Shapes = s
	}
	return out
}

// same fails unless a and b book alike.
func same(t *testing.T, step string, a, b *Cluster) {
	t.Helper()
	if na, nb := normal(a.Cluster().Nodes), normal(b.Cluster().Nodes); !reflect.DeepEqual(na, nb) {
		t.Fatalf("%s: nodes differ:\n got  %+v\n want %+v", step, na, nb)
	}
	sorted := func(r []cycle.Running) []cycle.Running {
		return slices.SortedFunc(slices.Values(r), func(x, y cycle.Running) int { return strings.Compare(x.ID, y.ID) })
	}
	if ra, rb := sorted(a.Running()), sorted(b.Running()); !reflect.DeepEqual(ra, rb) {
		t.Fatalf("%s: running differs:\n got  %+v\n want %+v", step, ra, rb)
	}
	if ua, ub := a.Usage(), b.Usage(); !reflect.DeepEqual(ua, ub) {
		t.Fatalf("%s: usage differs:\n got  %v\n want %v", step, ua, ub)
	}
	if ga, gb := a.Gangs(), b.Gangs(); !reflect.DeepEqual(ga, gb) {
		t.Fatalf("%s: gangs differ:\n got  %v\n want %v", step, ga, gb)
	}
	if a.Capacity() != b.Capacity() {
		t.Fatalf("%s: capacity %v, want %v", step, a.Capacity(), b.Capacity())
	}
}

// TestIncrementalMatchesFresh steps a cluster through random events
// (nodes come, go, change what they report or close; holds are booked,
// booked again changed, released, relabelled; some no longer fit) and
// checks after each that it books as a cluster built fresh from the
// nodes and holds of that moment, booked in order, does.
func TestIncrementalMatchesFresh(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := New()
		nodes := map[string]inventory.Node{}
		closed := map[string]string{}
		holds := map[string]Hold{}
		var order []string // first booked first
		names := []string{"n0", "n1", "n2", "n3", "nx"}
		for step := range 300 {
			var what string
			switch k := rng.IntN(10); {
			case k == 0 || len(nodes) == 0:
				name := names[rng.IntN(4)]
				in := inv(name, 1+rng.IntN(3), int64(2000+1000*rng.IntN(3)))
				if rng.IntN(2) == 0 {
					in.Pods = int64(1 + rng.IntN(4)) // a pod limit, often reached
				}
				why := ""
				if rng.IntN(4) == 0 {
					why = "not ready"
				}
				if err := c.SetNode(in, why); err != nil {
					t.Fatal(err)
				}
				nodes[name], closed[name] = in, why
				what = "set " + name
			case k == 1:
				name := names[rng.IntN(4)]
				c.RemoveNode(name)
				delete(nodes, name)
				what = "remove " + name
			case k == 2 && len(order) > 0:
				id := order[rng.IntN(len(order))]
				c.Release(id)
				delete(holds, id)
				order = slices.DeleteFunc(order, func(s string) bool { return s == id })
				what = "release " + id
			case k == 3 && len(order) > 0:
				id := order[rng.IntN(len(order))]
				c.Relabel(id, fmt.Sprintf("q%d", rng.IntN(3)), []string{"", "g0", "g1"}[rng.IntN(3)])
				h := holds[id]
				h.Queue, h.Gang = c.holds[id].Queue, c.holds[id].Gang
				holds[id] = h
				what = "relabel " + id
			default:
				id := fmt.Sprintf("w%d", rng.IntN(40))
				node := names[rng.IntN(len(names))]
				h := Hold{ID: id, Node: node, CPUMilli: int64(100 * (1 + rng.IntN(12))), MemoryMiB: 512,
					Queue: fmt.Sprintf("q%d", rng.IntN(3)), Priority: int32(rng.IntN(3)), Gang: []string{"", "g0", "g1"}[rng.IntN(3)]}
				h.Slot = rng.IntN(5) != 0
				h.Key = fmt.Sprint(h.Node, h.CPUMilli, h.Slot)
				if g := rng.IntN(4); g < 3 {
					h.Groups = [][]binding.Share{{share(node, g, int64(100*(1+rng.IntN(9))))}}
					h.Key += fmt.Sprint(h.Groups)
				}
				if rng.IntN(6) == 0 && len(order) > 0 {
					// A claim held for booked workloads.
					h.ID, h.For, h.CPUMilli, h.Slot = "claim "+id, []string{order[rng.IntN(len(order))], id}, 0, false
				}
				if _, ok := holds[h.ID]; !ok {
					order = append(order, h.ID)
				}
				_ = c.Book(h) // saturating bookings say so; both clusters book them alike
				holds[h.ID] = h
				what = "book " + h.ID + " on " + node
			}
			fresh := New()
			for _, name := range slices.Sorted(maps.Keys(nodes)) {
				if err := fresh.SetNode(nodes[name], closed[name]); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range order {
				_ = fresh.Book(holds[id])
			}
			same(t, fmt.Sprintf("seed %d step %d (%s)", seed, step, what), c, fresh)
		}
	}
}

// TestSaturatedBookingCountsAndIsNoVictim: a hold that no longer fits is
// booked saturating (the node shows no room), said so, and never a
// preemption candidate; releasing another hold there books the node
// again in order.
func TestSaturatedBookingCountsAndIsNoVictim(t *testing.T) {
	c := New()
	if err := c.SetNode(inv("n0", 1, 1000), ""); err != nil {
		t.Fatal(err)
	}
	a := Hold{ID: "a", Node: "n0", Key: "a", Groups: [][]binding.Share{{share("n0", 0, 700)}}}
	b := Hold{ID: "b", Node: "n0", Key: "b", Groups: [][]binding.Share{{share("n0", 0, 600)}}}
	if err := c.Book(a); err != nil {
		t.Fatal(err)
	}
	if err := c.Book(b); err == nil {
		t.Fatal("a hold over the GPU's compute booked without a word")
	}
	if free := c.Cluster().Nodes[0].GPUs[0].FreeMilli; free != 0 {
		t.Fatalf("free compute %d, want 0 (saturated)", free)
	}
	run := c.Running()
	if run[0].Stopping || !run[1].Stopping {
		t.Fatalf("running %+v: want a candidate, b not (inexact)", run)
	}
	c.Release("a")
	if free := c.Cluster().Nodes[0].GPUs[0].FreeMilli; free != 400 {
		t.Fatalf("after release free compute %d, want 400 (b booked exactly again)", free)
	}
	if c.Running()[0].Stopping {
		t.Fatal("b still marked inexact after the node was booked again")
	}
}

// TestPodSlotsBooked: each pod's hold takes one of its node's pod slots,
// with its first part only; a shared claim's hold takes none; a pod past
// the limit is booked saturating and said so, and booked exactly once a
// slot is given back.
func TestPodSlotsBooked(t *testing.T) {
	c := New()
	n := inv("n0", 1, 4000)
	n.Pods = 2
	if err := c.SetNode(n, ""); err != nil {
		t.Fatal(err)
	}
	free := func() int64 { return c.Cluster().Nodes[0].FreePods }
	a := Hold{ID: "a", Node: "n0", Key: "a", Slot: true, CPUMilli: 100,
		Groups: [][]binding.Share{{share("n0", 0, 100)}, {share("n0", 0, 100)}}} // two parts, one pod
	claim := Hold{ID: "claim", Node: "n0", Key: "claim", For: []string{"a"}, Groups: [][]binding.Share{{share("n0", 0, 100)}}}
	b := Hold{ID: "b", Node: "n0", Key: "b", Slot: true}
	for _, h := range []Hold{a, claim, b} {
		if err := c.Book(h); err != nil {
			t.Fatalf("book %s: %v", h.ID, err)
		}
	}
	if free() != 0 {
		t.Fatalf("%d slots free after 2 pods and a claim, want 0", free())
	}
	if err := c.Book(Hold{ID: "c", Node: "n0", Key: "c", Slot: true}); err == nil {
		t.Fatal("a third pod on a node allowing 2 booked without a word")
	}
	if free() != 0 {
		t.Fatalf("%d slots free after a saturated booking, want 0", free())
	}
	c.Release("a")
	if free() != 0 {
		t.Fatalf("%d slots free after a release with c waiting, want 0 (c booked again, exactly)", free())
	}
	if run := c.Running(); slices.ContainsFunc(run, func(r cycle.Running) bool { return r.ID == "c" && r.Stopping }) {
		t.Fatalf("c still inexact after the node was booked again: %+v", run)
	}
	c.Release("b")
	if free() != 1 {
		t.Fatalf("%d slots free, want 1", free())
	}
}

// TestAssumedPlacementGivesWayToTheBoundHold: what a cycle placed is
// booked until the front door books the workload; that replaces it,
// exactly.
func TestAssumedPlacementGivesWayToTheBoundHold(t *testing.T) {
	c, p, d := placedOnGPU1(t, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 4096, MemoryLimitMiB: 4096})
	c.Assume("w", cycle.Running{ID: "w", Queue: "q", Parts: []placement.Pod{p}, Decisions: []placement.Decision{d}})
	if _, assumed := c.Has("w"); !assumed {
		t.Fatal("not assumed")
	}
	if u := c.Usage()["q"]; u.GPUMilli != 250 || u.CPUMilli != 500 {
		t.Fatalf("assumed usage %+v", u)
	}
	h := Hold{ID: "w", Node: "n0", Key: "k", CPUMilli: 500, Queue: "q", Groups: [][]binding.Share{{share("n0", 1, 250)}}}
	if err := c.Book(h); err != nil {
		t.Fatal(err)
	}
	fresh := New()
	_ = fresh.SetNode(inv("n0", 2, 4000), "")
	_ = fresh.Book(h)
	same(t, "after the bound hold", c, fresh)
	if _, assumed := c.Has("w"); assumed {
		t.Fatal("still assumed")
	}
}

// TestClaimRunsWithItsOnlyWorkload: a claim one workload alone holds is
// freed by stopping it (part of its Running) and charged to its queue; a
// shared claim is no workload's, charged once, to the first booked.
func TestClaimRunsWithItsOnlyWorkload(t *testing.T) {
	c := New()
	_ = c.SetNode(inv("n0", 2, 4000), "")
	for _, h := range []Hold{
		{ID: "a", Node: "n0", Queue: "qa", CPUMilli: 100},
		{ID: "b", Node: "n0", Queue: "qb", CPUMilli: 100},
		{ID: "claim own", Node: "n0", For: []string{"a"}, Groups: [][]binding.Share{{share("n0", 0, 300)}}},
		{ID: "claim shared", Node: "n0", For: []string{"gone", "b", "a"}, Groups: [][]binding.Share{{share("n0", 1, 200)}}},
	} {
		if err := c.Book(h); err != nil {
			t.Fatal(err)
		}
	}
	run := c.Running()
	if len(run) != 2 || len(run[0].Parts) != 2 || len(run[1].Parts) != 1 {
		t.Fatalf("running %+v: want a with its claim's part, b alone", run)
	}
	u := c.Usage()
	want := map[string]queueing.Resources{"qa": {CPUMilli: 100, GPUMilli: 300, GPUMemoryMiB: 4096}, "qb": {CPUMilli: 100, GPUMilli: 200, GPUMemoryMiB: 4096}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("usage %v, want %v", u, want)
	}
}

// TestNodeGoneKeepsHolds: holds on a node that goes stay, unbooked, and
// are booked again when it comes back.
func TestNodeGoneKeepsHolds(t *testing.T) {
	c := New()
	_ = c.SetNode(inv("n0", 1, 4000), "")
	_ = c.SetNode(inv("n1", 1, 4000), "")
	_ = c.Book(Hold{ID: "a", Node: "n1", Key: "a", Groups: [][]binding.Share{{share("n1", 0, 500)}}})
	layout := c.Layout()
	c.RemoveNode("n1")
	if len(c.Cluster().Nodes) != 1 || len(c.Running()) != 0 || c.Layout() == layout {
		t.Fatalf("after removal: %d nodes, %d running, layout %d (was %d)", len(c.Cluster().Nodes), len(c.Running()), c.Layout(), layout)
	}
	_ = c.SetNode(inv("n1", 1, 4000), "")
	if ni, _ := c.Index("n1"); c.Cluster().Nodes[ni].GPUs[0].FreeMilli != 500 {
		t.Fatal("hold not booked again when its node came back")
	}
	if err := c.SetNode(inventory.Node{Name: "bad", GPUs: []inventory.GPU{{Index: 0}, {Index: 0}}}, ""); err == nil {
		t.Fatal("an inventory the engine cannot read was taken")
	}
}

// TestRunningAppendCopies: what Running returns is clipped, so a caller
// that appends to it gets its own entries (the books' next read neither
// sees nor overwrites them).
func TestRunningAppendCopies(t *testing.T) {
	c := New()
	if err := c.SetNode(inv("n", 2, 1000), ""); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Book(Hold{ID: fmt.Sprintf("w%d", i), Node: "n", Key: "k", Groups: [][]binding.Share{{share("n", i, 100)}}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Running()
	c.Release("w1") // the books' entries keep room past their end
	run := c.Running()
	mine := append(run, cycle.Running{ID: "mine"})
	if err := c.Book(Hold{ID: "w2", Node: "n", Key: "k", Groups: [][]binding.Share{{share("n", 1, 100)}}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range c.Running() {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"w0", "w2"}) || mine[1].ID != "mine" {
		t.Fatalf("running %v and the caller's %v, want [w0 w2] and mine", ids, mine[1].ID)
	}
}

// placedOnGPU1 is a cluster of one node "n0" (two GPUs) on which a cycle
// placed workload "w" asking r with 500m CPU on GPU 1, as the cycle books
// it (not yet assumed), with that pod and decision.
func placedOnGPU1(t *testing.T, r request.GPU) (*Cluster, placement.Pod, placement.Decision) {
	t.Helper()
	c := New()
	if err := c.SetNode(inv("n0", 2, 4000), ""); err != nil {
		t.Fatal(err)
	}
	p := placement.Pod{Name: "w", CPUMilli: 500, GPU: r}
	d := placement.Decision{Node: 0, GPUs: []int{1}}
	if err := c.Cluster().Apply(&p, d); err != nil {
		t.Fatal(err)
	}
	return c, p, d
}
