package placement

import (
	"math"
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func share(milli int64, w float64) Typical {
	return Typical{Shape: Shape{CPUMilli: 1000, GPUMilli: milli, GPUCount: 1}, Weight: w}
}

func TestHoleWasteTable(t *testing.T) {
	// Half the GPU pods take 500m, half a whole GPU.
	w := newHoleWaste(dist(share(500, 0.5), share(request.Whole, 0.5)), fillableShare)
	for _, tt := range []struct {
		h    int64
		want float64
	}{
		{0, 0},
		{500, 0},   // a 500m pod fills it exactly
		{1000, 0},  // a whole-GPU pod or two 500m pods
		{499, 499}, // nothing fits: all of it is lost
		{700, 200}, // a 500m pod leaves 200m that nothing fits
		{-5, 0},    // clamped
		{1200, 0},  // clamped
	} {
		if got := w.at(tt.h); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("W(%d) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestHoleWasteRareFillers(t *testing.T) {
	// 160m pods are 1% of GPU pods (a third of the fillable share): the
	// 190m an 810m pod leaves is filled a third of the time, leaving 30m.
	d := dist(share(810, 0.5), share(160, 0.01), share(request.Whole, 0.49))
	w := newHoleWaste(d, 0.03)
	want := (1.0/3)*30 + (2.0/3)*190
	if got := w.at(190); math.Abs(got-want) > 1e-9 {
		t.Fatalf("W(190) = %v, want %v", got, want)
	}
	// With the fillable share at 1% the same hole counts as filled.
	if got := newHoleWaste(d, 0.01).at(190); math.Abs(got-30) > 1e-9 {
		t.Fatalf("W(190) with fillable share 0.01 = %v, want 30", got)
	}
}

func TestHoleWasteWithoutGPUPods(t *testing.T) {
	for _, d := range []Distribution{nil, dist(Typical{Shape: Shape{CPUMilli: 4000}, Weight: 1})} {
		w := newHoleWaste(d, fillableShare)
		for _, h := range []int64{0, 1, 250, request.Whole} {
			if got := w.at(h); got != float64(h) {
				t.Fatalf("%v: W(%d) = %v, want %d (nothing fills a hole)", d, h, got, h)
			}
		}
	}
}

func TestHoleWasteMultiGPUFillsOnlyWholeGPUs(t *testing.T) {
	multi := Typical{Shape: Shape{CPUMilli: 8000, GPUMilli: request.Whole, GPUCount: 4}, Weight: 1}
	w := newHoleWaste(dist(multi), fillableShare)
	if w.at(request.Whole) != 0 || w.at(999) != 999 {
		t.Fatalf("W(1000) = %v, W(999) = %v; want 0 and 999", w.at(request.Whole), w.at(999))
	}
}

func TestTesseraPairsSmallPodWithLargeShare(t *testing.T) {
	// An 810m pod leaves 190m that only the rare 160m pods fit; a 160m pod
	// goes there, not onto a GPU whose hole popular pods can still fill.
	d := dist(share(810, 0.3), share(470, 0.3), share(160, 0.02), share(request.Whole, 0.38))
	for seed := uint64(0); seed < 10; seed++ {
		c := &Cluster{Nodes: []Node{
			NewNode("fresh", 64000, 0, 2, "T4", 0),
			NewNode("half", 64000, 0, 2, "T4", 0),
			NewNode("big", 64000, 0, 2, "T4", 0),
		}}
		c.Nodes[1].GPUs[0].FreeMilli = 530
		c.Nodes[2].GPUs[1].FreeMilli = 190
		got := place(t, c, NewTessera(d, seed), sharePod("small", 1000, 160))
		if got.Node != 2 || got.GPUs[0] != 1 {
			t.Fatalf("seed %d: 160m pod went to node %d GPU %v, want the 810m pod's GPU (node 2, GPU 1)", seed, got.Node, got.GPUs)
		}
	}
}

func TestTesseraLeavesFillableHole(t *testing.T) {
	// Half the GPU pods take 320m, half a whole GPU. A 320m pod on the GPU
	// with 640m free leaves exactly one more 320m pod's room and keeps the
	// free GPU whole; on the free GPU it would leave 680m, which 320m pods
	// fill only down to a 40m sliver.
	d := dist(share(320, 0.5), share(request.Whole, 0.5))
	for seed := uint64(0); seed < 10; seed++ {
		c := &Cluster{Nodes: []Node{NewNode("free", 64000, 0, 1, "T4", 0), NewNode("used", 64000, 0, 1, "T4", 0)}}
		c.Nodes[1].GPUs[0].FreeMilli = 640
		if got := place(t, c, NewTessera(d, seed), sharePod("p", 1000, 320)); got.Node != 1 {
			t.Fatalf("seed %d: 320m pod went to node %d, want the GPU with 640m free", seed, got.Node)
		}
		// Within one node the same holds between its GPUs.
		n := NewNode("two", 64000, 0, 2, "T4", 0)
		n.GPUs[1].FreeMilli = 640
		c = &Cluster{Nodes: []Node{n}}
		if got := place(t, c, NewTessera(d, seed), sharePod("p", 1000, 320)); got.GPUs[0] != 1 {
			t.Fatalf("seed %d: 320m pod went to GPU %d, want GPU 1 (640m free)", seed, got.GPUs[0])
		}
	}
}

func TestTesseraWholeGPUPodsPack(t *testing.T) {
	// request.Whole-GPU pods cost the same everywhere by holes; ties go to the
	// fixed node order, so successive pods fill one node before the next.
	d := dist(share(request.Whole, 1))
	c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 4, "T4", 0), NewNode("b", 64000, 0, 4, "T4", 0)}}
	pol := NewTessera(d, 7)
	first := place(t, c, pol, wholePod("w0", 1000, 1)).Node
	for i := 1; i < 4; i++ {
		if got := place(t, c, pol, wholePod("w", 1000, 1)).Node; got != first {
			t.Fatalf("pod %d went to node %d, want node %d (packing)", i, got, first)
		}
	}
}

func TestFillableFollowsSharingShare(t *testing.T) {
	cpuOnly := Typical{Shape: Shape{CPUMilli: 4000}, Weight: 0.5}
	for _, tt := range []struct {
		name string
		d    Distribution
		want float64
	}{
		{"no GPU pods", dist(cpuOnly), fillableShare},
		{"40% sharing keeps the floor", dist(share(470, 0.4), share(request.Whole, 0.6)), fillableShare},
		{"half sharing", dist(share(810, 0.5), share(request.Whole, 0.5)), fillablePerSharing * 0.5},
		{"CPU-only pods do not count", dist(share(810, 0.25), share(request.Whole, 0.25), cpuOnly), fillablePerSharing * 0.5},
		{"all sharing", dist(share(810, 0.7), share(470, 0.3)), fillablePerSharing},
	} {
		if got := fillable(tt.d); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: fillable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHoleWasteSharingHeavyDistribution(t *testing.T) {
	// Every GPU pod shares a GPU: 160m pods are 4% of them, above the 3%
	// floor but under the raised fillable share, so the 190m an 810m pod
	// leaves is filled only 0.04 / fillablePerSharing of the time.
	d := dist(share(810, 0.96), share(160, 0.04))
	q := 0.04 / fillablePerSharing
	want := q*30 + (1-q)*190
	if got := newHoleWaste(d, fillable(d)).at(190); math.Abs(got-want) > 1e-9 {
		t.Fatalf("W(190) = %v, want %v", got, want)
	}
	// At the 3% floor the same hole would count as surely filled.
	if got := newHoleWaste(d, fillableShare).at(190); math.Abs(got-30) > 1e-9 {
		t.Fatalf("W(190) at the floor = %v, want 30", got)
	}
}

func TestHoleSupplyOnlyWhenSharingDominates(t *testing.T) {
	d := dist(share(470, 0.4), share(request.Whole, 0.6))
	if s := newHoleSupply(d, fillable(d)); s != nil {
		t.Fatalf("40%% sharing pods: supply model %+v, want none", s)
	}
	d = dist(share(810, 0.5), share(470, 0.45), share(160, 0.05))
	if newHoleSupply(d, fillable(d)) == nil {
		t.Fatal("all GPU pods share a GPU: no supply model")
	}
}

func TestHoleSupplyPlentifulHoleIsLost(t *testing.T) {
	// Every GPU pod shares a GPU; 160m pods (5%) are all that fit the 190m
	// an 810m pod leaves.
	d := dist(share(810, 0.5), share(470, 0.45), share(160, 0.05))
	f := fillable(d)
	static := newHoleWaste(d, f)
	s := newHoleSupply(d, f)

	// A free cluster: no hole competes, the static table holds.
	c := &Cluster{Nodes: []Node{NewNode("a", 64000, 0, 8, "T4", 0), NewNode("b", 64000, 0, 8, "T4", 0)}}
	if got := s.table(c, nil); *got != *static {
		t.Fatal("free cluster: supply table differs from the static one")
	}

	// Ten 190m holes and nothing else free: the few 160m pods expected
	// before the cluster is full go to those, and one more 190m hole is
	// lost whole, where the static table expects it filled most of the time.
	for i := range c.Nodes {
		for j := range c.Nodes[i].GPUs {
			c.Nodes[i].GPUs[j].FreeMilli = 0
		}
	}
	for k := 0; k < 10; k++ {
		c.Nodes[k/8].GPUs[k%8].FreeMilli = 190
	}
	w := s.table(c, nil)
	if got := w.at(190); math.Abs(got-190) > 1e-9 {
		t.Fatalf("W(190) with ten 190m holes = %v, want 190 (static %v)", got, static.at(190))
	}
	if static.at(190) >= 190 {
		t.Fatalf("static W(190) = %v, want it partly filled", static.at(190))
	}
	// A 530m hole still gets a 470m pod (none of those is taken).
	if got, want := w.at(530), static.at(530); got > want+60 {
		t.Fatalf("W(530) = %v, static %v", got, want)
	}
}

func TestTesseraContestedFreeGPU(t *testing.T) {
	// A 160m pod can take a free GPU or the 780m left on a used one. By the
	// plain table the partial hole is cheaper; but a free GPU is contested
	// (the large shares that fit nowhere else take the last ones), counts
	// double, and the pod opens it, where a later 810m pod can join it.
	d := dist(share(810, 0.2), share(470, 0.15), share(230, 0.05), share(160, 0.02), share(request.Whole, 0.58))
	plain := newHoleWaste(d, fillable(d))
	free, hole := plain.at(840)-plain.at(request.Whole), plain.at(620)-plain.at(780)
	if free <= hole || plain.at(840)-freeGPUFactor*plain.at(request.Whole) >= hole {
		t.Fatalf("set-up: want the free GPU dearer than the hole (%.1f vs %.1f) only by the plain table", free, hole)
	}
	for seed := uint64(0); seed < 10; seed++ {
		n := NewNode("n", 64000, 0, 2, "T4", 0)
		n.GPUs[1].FreeMilli = 780
		c := &Cluster{Nodes: []Node{n}}
		if got := place(t, c, NewTessera(d, seed), sharePod("p", 1000, 160)); got.GPUs[0] != 0 {
			t.Fatalf("seed %d: 160m pod went to GPU %d, want the free GPU 0", seed, got.GPUs[0])
		}
	}
}
