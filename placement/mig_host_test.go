package placement

import (
	"math"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// a100Spec is the A100-80GB's MIG geometry.
func a100Spec(t *testing.T) *catalog.MIGSpec {
	t.Helper()
	m, ok := catalog.Default().Lookup("A100-80GB")
	if !ok || m.MIG == nil {
		t.Fatal("no A100-80GB geometry")
	}
	return m.MIG
}

// hostDist is a distribution of 3g.40gb requests (A100-80GB: 3 compute
// slices) asking cpu milli and mem MiB each.
func hostDist(cpu int64, mem float64) Distribution {
	return Distribution{{Shape: Shape{GPUCount: 1, MIGProfile: "3g.40gb", CPUMilli: cpu}, Weight: 1, MemoryMiB: mem}}
}

// hostNode is a node of gpus managed, empty A100-80GB GPUs with cpu milli
// and mem MiB.
func hostNode(name string, gpus int, cpu, mem int64) inventory.Node {
	n := migInv(name, "A100-80GB", gpus, true)
	n.CPUMilli, n.MemoryMiB = cpu, mem
	return n
}

// placedOn places p with the planner of d on the nodes, in the order given
// and reversed (so that the fixed node order cannot decide), and returns
// the node's name, failing the test when the two orders disagree.
func placedOn(t *testing.T, d Distribution, p Pod, nodes ...inventory.Node) string {
	t.Helper()
	var names []string
	for _, order := range [][]inventory.Node{nodes, {nodes[1], nodes[0]}} {
		c := cluster(t, order...)
		for seed := uint64(1); seed <= 4; seed++ {
			dec, err := NewTessera(d, seed).Place(c, &p)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			names = append(names, c.Nodes[dec.Node].Name)
		}
	}
	for _, n := range names[1:] {
		if n != names[0] {
			t.Fatalf("%s: placed on %v depending on node order and seed", p.Name, names)
		}
	}
	return names[0]
}

// TestMIGPlannerHostHeavyAvoidsShortNode: the typical requests ask 1 CPU
// per slice. A request asking 4 per slice would leave the node with 12
// CPUs unable to feed the 3 slices it leaves (stranded +3); on the node
// with 64 CPUs nothing is stranded, so it goes there, whatever the node
// order. The short node gets it only when no other node has the CPU.
func TestMIGPlannerHostHeavyAvoidsShortNode(t *testing.T) {
	d := hostDist(3000, 0)
	heavy := migPod("heavy", "3g.40gb", 1)
	heavy.CPUMilli = 12000
	if got := placedOn(t, d, heavy, hostNode("short", 1, 12000, 512<<10), hostNode("rich", 1, 64000, 512<<10)); got != "rich" {
		t.Errorf("heavy request on %s; want rich (short would strand 3 slices)", got)
	}
	if got := placedOn(t, d, heavy, hostNode("short", 1, 12000, 512<<10), hostNode("rich-no-cpu", 1, 8000, 512<<10)); got != "short" {
		t.Errorf("heavy request on %s; want short, the only node with its CPU", got)
	}
}

// TestMIGPlannerHostLightFillsShortNode: a request asking no CPU takes
// slices the node with 3 CPUs cannot feed anyway (its stranded slices
// fall from 9 to 6), so it goes there rather than to the node with CPU
// for all its slices, whatever the node order.
func TestMIGPlannerHostLightFillsShortNode(t *testing.T) {
	d := hostDist(3000, 0)
	light := migPod("light", "3g.40gb", 1)
	light.CPUMilli = 0
	if got := placedOn(t, d, light, hostNode("rich", 2, 64000, 512<<10), hostNode("poor", 2, 3000, 512<<10)); got != "poor" {
		t.Errorf("light request on %s; want poor", got)
	}
}

// TestMIGPlannerHostMemory: the same with host memory: the typical
// requests ask 10 GiB per slice, the request 40 GiB per slice.
func TestMIGPlannerHostMemory(t *testing.T) {
	d := hostDist(0, 30<<10)
	heavy := migPod("heavy", "3g.40gb", 1)
	heavy.CPUMilli, heavy.MemoryMiB = 0, 120<<10
	if got := placedOn(t, d, heavy, hostNode("short", 1, 64000, 120<<10), hostNode("rich", 1, 64000, 512<<10)); got != "rich" {
		t.Errorf("heavy request on %s; want rich", got)
	}
}

// TestMIGHostCostWithoutNeeds: typical requests that ask no CPU or memory
// give no host term, so the planner's choice is its slot cost alone.
func TestMIGHostCostWithoutNeeds(t *testing.T) {
	c := cluster(t, hostNode("n", 2, 1000, 1024))
	pl := newMIGPlan(hostDist(0, 0))
	pl.prepare(c)
	p := migPod("p", "3g.40gb", 1)
	cands := []migCand{{0, migOption{took: 3}}}
	h := pl.nodeHost(&c.Nodes[0], cands, 1)
	if got := pl.hostCost(&c.Nodes[0], &p, &h); got != 0 {
		t.Errorf("host cost %v; want 0", got)
	}
}

// TestMIGStranded checks X(U, C, M) against hand-worked values: half the
// requests (by slices) ask 1 CPU per slice, half 4.
func TestMIGStranded(t *testing.T) {
	spec := a100Spec(t)
	d := Distribution{
		{Shape: Shape{GPUCount: 1, MIGProfile: "1g.10gb", CPUMilli: 1000}, Weight: 0.5},
		{Shape: Shape{GPUCount: 1, MIGProfile: "1g.10gb", CPUMilli: 4000}, Weight: 0.5},
	}
	m := newMIGPlan(d).model("A100-80GB", spec)
	inf := math.Inf(1)
	for _, c := range []struct {
		u, cpu float64
		bound  bool
		want   float64
	}{
		{8, 8000, true, 0.5*0 + 0.5*(8-2)}, // each request at its own need
		{8, 8000, false, 8 - 8000/2500.0},  // at the mean, 2.5 CPUs per slice
		{8, 40000, false, 0},               // CPU for every slice
		{8, -5, true, 8},                   // no CPU left: every slice
		{0, 0, true, 0},                    // no slices, nothing stranded
		{8, inf, true, 0},                  // CPU not tracked
	} {
		if got := m.stranded(c.u, c.cpu, inf, c.bound); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("X(%v, %v, bound %v) = %v; want %v", c.u, c.cpu, c.bound, got, c.want)
		}
	}
}

// TestMIGHostBound: the workload is host-bound when it asks more CPU per
// slice than the cluster has, pods without GPUs included.
func TestMIGHostBound(t *testing.T) {
	c := cluster(t, hostNode("n", 8, 64000, 512<<10)) // 56 slices: 1143 CPU milli each
	mig := Typical{Shape: Shape{GPUCount: 1, MIGProfile: "1g.10gb", CPUMilli: 1000}, Weight: 0.5}
	cpuOnly := Typical{Shape: Shape{CPUMilli: 100000}, Weight: 0.5}
	spec := a100Spec(t)
	for _, x := range []struct {
		name string
		all  Distribution
		want bool
	}{
		{"MIG requests alone", Distribution{mig}, false},
		{"with CPU-only pods", Distribution{mig, cpuOnly}, true},
	} {
		_, migs := x.all.split()
		pl := newMIGPlan(migs).withWorkload(x.all)
		pl.prepare(c)
		if got := pl.hostBound(pl.model("A100-80GB", spec)); got != x.want {
			t.Errorf("%s: bound %v; want %v", x.name, got, x.want)
		}
	}
}

// TestMIGUsable: a GPU's usable slices are what its layout is expected to
// still place plus its free existing instances.
func TestMIGUsable(t *testing.T) {
	spec := a100Spec(t)
	m := newMIGPlan(hostDist(3000, 0)).model("A100-80GB", spec)
	c := cluster(t,
		migInv("managed", "A100-80GB", 2, true, nil, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-a", true)}),
		migInv("static", "A100-80GB", 1, false, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-b", false), inst("1g.10gb", 0, "MIG-c", true)}))
	for _, x := range []struct {
		node, gpu int
		want      float64
	}{
		{0, 0, 6}, // empty: two 3g
		{0, 1, 3}, // 3g at 4 in use: one more at 0
		{1, 0, 3}, // static: the free 3g instance
	} {
		if got := m.usable(&c.Nodes[x.node].GPUs[x.gpu]); got != x.want {
			t.Errorf("node %d GPU %d: usable %v; want %v", x.node, x.gpu, got, x.want)
		}
	}
}
