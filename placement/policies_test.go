package placement

import (
	"errors"
	"testing"
)

// Each policy on a small hand-built cluster whose right answer is known.

func TestRandomOnlyPicksFeasibleNodes(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("small", 1000, 0, 1, "T4", 0), NewNode("big", 64000, 0, 2, "T4", 0)}}
	pol := NewRandom(7)
	for i := 0; i < 20; i++ {
		d, err := pol.Place(c, &Pod{Name: "p", CPUMilli: 2000})
		if err != nil || d.Node != 1 {
			t.Fatalf("Place = %+v, %v; want node 1 (the only one with the CPU)", d, err)
		}
	}
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		d, _ := pol.Place(c, &Pod{Name: "p", CPUMilli: 10})
		seen[d.Node] = true
	}
	if len(seen) != 2 {
		t.Fatalf("Random chose only nodes %v over 50 tries", seen)
	}
}

func TestBestFitPicksFullestNode(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("empty", 32000, 0, 4, "T4", 0), NewNode("busy", 32000, 0, 4, "T4", 0)}}
	c.Nodes[1].FreeCPUMilli = 8000
	c.Nodes[1].GPUs[0].FreeMilli = 0
	if d := place(t, c, NewBestFit(1), wholePod("p", 1000, 1)); d.Node != 1 {
		t.Fatalf("BestFit chose node %d, want the busy node 1", d.Node)
	}
}

func TestSpreadPicksEmptiestNode(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("busy", 32000, 0, 4, "T4", 0), NewNode("empty", 32000, 0, 4, "T4", 0)}}
	c.Nodes[0].GPUs[0].FreeMilli = 200
	d := place(t, c, NewSpread(1), sharePod("p", 1000, 100))
	if d.Node != 1 {
		t.Fatalf("Spread chose node %d, want the empty node 1", d.Node)
	}
}

func TestDotProductAvoidsAlignedNode(t *testing.T) {
	// A GPU-heavy pod goes where free GPU is scarce relative to CPU: the
	// node whose free vector has the smaller dot product with the demand.
	c := &Cluster{Nodes: []Node{NewNode("gpu-rich", 8000, 0, 8, "T4", 0), NewNode("cpu-rich", 64000, 0, 2, "T4", 0)}}
	if d := place(t, c, NewDotProduct(1), wholePod("p", 1000, 2)); d.Node != 1 {
		t.Fatalf("DotProduct chose node %d, want node 1", d.Node)
	}
}

func TestGpuClusteringGroupsSameShape(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 4, "T4", 0), NewNode("b", 64000, 0, 4, "T4", 0), NewNode("c", 64000, 0, 4, "T4", 0)}}
	for _, x := range []struct {
		node int
		pod  Pod
	}{{0, wholePod("two", 1, 2)}, {1, sharePod("share", 1, 300)}} {
		if err := c.Apply(&x.pod, Decision{Node: x.node, GPUs: []int{0, 1}[:x.pod.GPUCount()]}); err != nil {
			t.Fatal(err)
		}
	}
	if d := place(t, c, NewGpuClustering(1), sharePod("s2", 1, 200)); d.Node != 1 {
		t.Fatalf("sharing pod went to node %d, want node 1 with the other sharing pod", d.Node)
	}
	if d := place(t, c, NewGpuClustering(1), wholePod("two2", 1, 2)); d.Node != 0 {
		t.Fatalf("2-GPU pod went to node %d, want node 0 with the other 2-GPU pod", d.Node)
	}
}

func TestGpuPackingPrefersSharedGPU(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("idle", 64000, 0, 2, "T4", 0), NewNode("used", 64000, 0, 2, "T4", 0)}}
	c.Nodes[1].GPUs[1].FreeMilli = 600
	d := place(t, c, NewGpuPacking(1), sharePod("p", 1, 500))
	if d.Node != 1 || d.GPUs[0] != 1 {
		t.Fatalf("GpuPacking chose %+v, want node 1 GPU 1 (already shared)", d)
	}
	d = place(t, c, NewGpuPacking(1), wholePod("w", 1, 1))
	if d.Node != 1 || d.GPUs[0] != 0 {
		t.Fatalf("GpuPacking chose %+v, want the free GPU of the used node", d)
	}
}

func TestFGDMinimisesFragmentationGrowth(t *testing.T) {
	// Every future pod takes 600m. Node a has one GPU with exactly 600m
	// free; node b has a whole GPU.
	d := dist(Typical{Shape: Shape{GPUMilli: 600, GPUCount: 1}, Weight: 1})
	mk := func() *Cluster {
		c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 1, "T4", 0), NewNode("b", 64000, 0, 1, "T4", 0)}}
		c.Nodes[0].GPUs[0].FreeMilli = 600
		return c
	}
	// A 400m pod on a would leave 200m nobody can use; on b it leaves 600m.
	if got := place(t, mk(), NewFGD(d, 1), sharePod("p", 1, 400)); got.Node != 1 {
		t.Fatalf("400m pod went to node %d, want b", got.Node)
	}
	// A 600m pod fills a exactly; on b it would strand 400m.
	if got := place(t, mk(), NewFGD(d, 1), sharePod("p", 1, 600)); got.Node != 0 {
		t.Fatalf("600m pod went to node %d, want a", got.Node)
	}
	// Within a node, the GPU whose leftover stays usable wins.
	c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 2, "T4", 0)}}
	c.Nodes[0].GPUs[1].FreeMilli = 1000
	c.Nodes[0].GPUs[0].FreeMilli = 700
	if got := place(t, c, NewFGD(d, 1), sharePod("p", 1, 400)); got.GPUs[0] != 1 {
		t.Fatalf("400m pod went to GPU %d, want GPU 1 (1000m free leaves 600m usable)", got.GPUs[0])
	}
}

func TestTesseraKeepsCPUForGPUs(t *testing.T) {
	// Typical pods take one GPU and 12 CPUs. A 40-CPU CPU-only pod fits on
	// both nodes without stopping one typical pod, so FGD sees a tie; but
	// on the 8-GPU node it would strand GPUs its CPU can no longer feed.
	d := dist(Typical{Shape: Shape{CPUMilli: 12000, GPUMilli: 1000, GPUCount: 1}, Weight: 1})
	for seed := uint64(0); seed < 20; seed++ {
		c := &Cluster{Nodes: []Node{NewNode("g8", 96000, 0, 8, "G2", 0), NewNode("t4", 104000, 0, 2, "T4", 0)}}
		if got := place(t, c, NewTessera(d, seed), cpuPod("cpu", 40000)); got.Node != 1 {
			t.Fatalf("seed %d: CPU pod went to node %d, want the CPU-rich 2-GPU node", seed, got.Node)
		}
	}
}

func TestNoFitIsErrNoFit(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("a", 1000, 0, 1, "T4", 0)}}
	for _, name := range Names() {
		pol, err := New(name, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = pol.Place(c, &Pod{Name: "big", CPUMilli: 5000})
		if !errors.Is(err, ErrNoFit) {
			t.Errorf("%s: err = %v, want ErrNoFit", name, err)
		}
	}
	if _, err := New("nope", Options{}); err == nil {
		t.Fatal("New(nope) succeeded")
	}
}

func TestTypicalShapes(t *testing.T) {
	var pods []Pod
	for i := 0; i < 6; i++ {
		pods = append(pods, sharePod("a", 1000, 500))
	}
	for i := 0; i < 3; i++ {
		pods = append(pods, wholePod("b", 2000, 1))
	}
	pods = append(pods, cpuPod("c", 4000))
	d := TypicalShapes(pods, 0.9)
	if len(d) != 2 || d[0].Shape.GPUMilli != 500 || d[1].Shape.GPUMilli != 1000 {
		t.Fatalf("typical = %+v, want the 500m then the 1000m shape", d)
	}
	if d[0].Weight != 6.0/9 || d[1].Weight != 3.0/9 {
		t.Fatalf("weights = %v, %v; want renormalised 6/9 and 3/9", d[0].Weight, d[1].Weight)
	}
}

func TestClusterFragmentation(t *testing.T) {
	d := dist(Typical{Shape: Shape{GPUMilli: 500, GPUCount: 1}, Weight: 0.5}, Typical{Shape: Shape{GPUMilli: 1000, GPUCount: 2}, Weight: 0.5})
	c := &Cluster{Nodes: []Node{NewNode("a", 0, 0, 2, "T4", 0)}}
	c.Nodes[0].GPUs[0].FreeMilli = 300
	// 500m shape: fits on GPU 1, GPU 0's 300m is lost. 2-GPU shape: does
	// not fit, all 1300m lost. Expectation: 0.5*300 + 0.5*1300.
	if got := ClusterFragmentation(c, d); got != 800 {
		t.Fatalf("fragmentation = %v, want 800", got)
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for _, name := range Names() {
		pol, err := New(name, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if pol.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, pol.Name())
		}
	}
}

// TestDefaultPolicyLearnsOnlyFromObservedArrivals: without a distribution
// given, the default policy learns the typical pods from the arrivals its
// caller reports (Observe), then behaves like FGD would; Place alone (a
// retry, a probe, a read-only query) teaches it nothing.
func TestDefaultPolicyLearnsOnlyFromObservedArrivals(t *testing.T) {
	// Typical pods take a whole GPU: learned, the policy keeps b's whole
	// GPU free and puts a 400m pod on a; knowing nothing, it does not.
	cluster := func() *Cluster {
		c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 1, "T4", 0), NewNode("b", 64000, 0, 1, "T4", 0)}}
		c.Nodes[0].GPUs[0].FreeMilli = 600
		return c
	}
	newPolicy := func() Policy {
		pol, err := New(DefaultPolicy, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	fresh := place(t, cluster(), newPolicy(), sharePod("p", 1, 400))

	placedOnly := newPolicy()
	for i := 0; i < 10; i++ {
		p := sharePod("learn", 1, 1000)
		if _, err := placedOnly.Place(cluster(), &p); err != nil {
			t.Fatal(err)
		}
	}
	if d := place(t, cluster(), placedOnly, sharePod("p", 1, 400)); d.Node != fresh.Node {
		t.Fatalf("after 10 Place calls without Observe the 400m pod went to node %d, a fresh policy sends it to %d: Place learned", d.Node, fresh.Node)
	}

	learned := newPolicy()
	obs, ok := learned.(Observer)
	if !ok {
		t.Fatal("the default policy without a distribution is not an Observer: nothing can teach it")
	}
	for i := 0; i < 10; i++ {
		p := sharePod("learn", 1, 1000)
		obs.Observe(&p)
	}
	if d := place(t, cluster(), learned, sharePod("p", 1, 400)); d.Node != 0 {
		t.Fatalf("400m pod went to node %d, want a (b's whole GPU is what typical pods need)", d.Node)
	}
	if fresh.Node == 0 {
		t.Fatal("a fresh policy already sends the pod to a: the case does not show learning")
	}
}
