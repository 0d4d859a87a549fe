package placement

import (
	"errors"
	"testing"
)

// Explain gives the figures behind the GPU unit's sentence, and a policy's
// no-fit error carries the first node's rejection with the same words as
// before.
func TestExplainGPUFigures(t *testing.T) {
	n := NewNode("a", 0, 0, 4, "T4", 16000)
	n.GPUs[0].FreeMilli = 300 // short of compute for 0.5
	n.GPUs[1].FreeMemoryMiB = 1000
	n.GPUs[3].Model = "L4"
	half := sharePod("half", 0, 500)
	half.GPU.MemoryMiB = 4000
	bigMem := sharePod("big", 0, 100)
	bigMem.GPU.MemoryMiB = 20000
	cases := []struct {
		name string
		pod  Pod
		unit Unit
		want GPUFigures
	}{
		{"fits", sharePod("fits", 0, 200), 0, GPUFigures{}},
		{"more GPUs than the node", wholePod("five", 0, 5), UnitGPUs, GPUFigures{Want: 5, Have: 4, Allowed: 4, ShortCompute: 1, ShortMemory: 1}},
		{"no allowed model", wholePod("a100", 0, 1, "A100"), UnitGPUs, GPUFigures{Want: 1, Have: 4}},
		{"fewer of the model", wholePod("t4s", 0, 4, "T4"), UnitGPUs, GPUFigures{Want: 4, Have: 4, Allowed: 3, ShortCompute: 1, ShortMemory: 1}},
		{"memory everywhere short", bigMem, UnitGPUs, GPUFigures{Want: 1, Have: 4, Allowed: 4, ShortMemory: 4}},
		{"cpu", cpuPod("cpu", 1), 0, GPUFigures{}},
		{"compute and memory short", func() Pod { p := half; p.GPU.Count = 4; p.GPU.ComputeMilli = 500; return p }(), UnitGPUs,
			GPUFigures{Want: 4, Have: 4, Allowed: 4, ShortCompute: 1, ShortMemory: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := Explain(&n, &tc.pod)
			fok, reason := Feasible(&n, &tc.pod)
			if ok != fok || r.Reason != reason {
				t.Errorf("Explain = %v, %q; Feasible = %v, %q", ok, r.Reason, fok, reason)
			}
			if ok != (tc.unit == 0) || r.Unit != tc.unit || r.GPUs != tc.want {
				t.Errorf("Explain = %+v, %v; want unit %d, figures %+v", r, ok, tc.unit, tc.want)
			}
			if !ok && r.Node != "a" {
				t.Errorf("node %q, want a", r.Node)
			}
		})
	}
}

func TestNoFitErrorCarriesTheRejection(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("a", 0, 0, 1, "T4", 16000)}}
	pod := wholePod("two", 0, 2)
	_, err := NewBestFit(1).Place(c, &pod)
	var nf *NoFitError
	if !errors.As(err, &nf) || !errors.Is(err, ErrNoFit) {
		t.Fatalf("err = %v, want a *NoFitError wrapping ErrNoFit", err)
	}
	if want := "pod two: no feasible node (first rejection: a: node has 1 GPUs, 2 requested)"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if nf.First.Unit != UnitGPUs || nf.First.GPUs.Have != 1 || nf.First.GPUs.Want != 2 {
		t.Errorf("first rejection %+v", nf.First)
	}
	if _, err := NewBestFit(1).Place(&Cluster{}, &pod); err == nil || err.Error() != "pod two: no feasible node (first rejection: cluster has no nodes)" {
		t.Errorf("empty cluster: %v", err)
	}
}

// A closed node takes no pod (any kind, every policy) and says why in the
// front door's words; the work booked on it stays, and it opens again.
func TestClosedNodeTakesNothing(t *testing.T) {
	open := NewNode("open", 8000, 64<<10, 2, "T4", 16000)
	closed := NewNode("closed", 8000, 64<<10, 4, "T4", 16000) // the better fit for most policies
	closed.Closed = "node is cordoned"
	pods := []Pod{sharePod("share", 0, 250), wholePod("whole", 0, 1), cpuPod("cpu", 1)}
	for _, p := range pods {
		r, ok := Explain(&closed, &p)
		if ok || r.Unit != UnitOpen || r.Reason != "node is cordoned" {
			t.Errorf("%s: Explain(closed) = %+v, %v; want unit open, the node's reason", p.Name, r, ok)
		}
		if ok, why := Feasible(&closed, &p); ok || why != "node is cordoned" {
			t.Errorf("%s: Feasible(closed) = %v, %q", p.Name, ok, why)
		}
	}
	for _, name := range Names() {
		pol, err := New(name, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			c := &Cluster{Nodes: []Node{closed, open}}
			d, err := pol.Place(c, &p)
			if err != nil || d.Node != 1 {
				t.Errorf("%s, %s: placed on %d (%v), want the open node 1", name, p.Name, d.Node, err)
			}
			c.Nodes = c.Nodes[:1]
			if _, err := pol.Place(c, &p); !errors.Is(err, ErrNoFit) {
				t.Errorf("%s, %s: on the closed node alone: %v, want no fit", name, p.Name, err)
			}
		}
	}
}
