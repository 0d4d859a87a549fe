package placement

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestFeasibilityUnits(t *testing.T) {
	n := NewNode("a", 8000, 4096, 2, "T4", 16000)
	n.GPUs[0].FreeMilli = 300
	mig := wholePod("mig", 1, 1)
	mig.GPU.MIGProfile = "1g.10gb"
	memHog := sharePod("mem", 1, 100)
	memHog.MemoryMiB = 5000
	gpuMem := sharePod("gpumem", 1, 200)
	gpuMem.GPU.MemoryMiB = 17000
	cases := []struct {
		pod  Pod
		ok   bool
		want string
	}{
		{sharePod("fits", 1000, 300), true, ""},
		{cpuPod("cpu", 9000), false, "insufficient CPU"},
		{memHog, false, "insufficient memory"},
		{wholePod("three", 1, 3), false, "node has 2 GPUs"},
		{wholePod("two", 1, 2), false, "whole GPUs"},
		{wholePod("model", 1, 1, "A100"), false, "allowed model"},
		{wholePod("model ok", 1, 1, "A100", "T4"), true, ""},
		{mig, false, "the node has no GPU in MIG mode"},
		{gpuMem, false, "no GPU has 200m"},
	}
	for _, tc := range cases {
		ok, reason := Feasible(&n, &tc.pod)
		if ok != tc.ok || !strings.Contains(reason, tc.want) {
			t.Errorf("%s: Feasible = %v, %q; want %v, %q", tc.pod.Name, ok, reason, tc.ok, tc.want)
		}
		if ok != feasible(&n, &tc.pod) {
			t.Errorf("%s: feasible and Feasible disagree", tc.pod.Name)
		}
	}
}

func TestPickWholePrefersNVLinkAndNUMA(t *testing.T) {
	n := NewNode("a", 0, 0, 4, "H100", 0)
	n.NVLinks = [][]int{{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 12}, {0, 0, 12, 0}}
	if got := pickWhole(&n, []int{0, 1, 2, 3}, 2); got[0] != 2 || got[1] != 3 {
		t.Fatalf("NVLink pair: got %v, want [2 3]", got)
	}
	m := NewNode("b", 0, 0, 4, "H100", 0)
	for i, numa := range []int{0, 1, 0, 1} {
		m.GPUs[i].NUMANode = numa
	}
	if got := pickWhole(&m, []int{0, 1, 2, 3}, 2); got[0] != 0 || got[1] != 2 {
		t.Fatalf("NUMA pair: got %v, want [0 2]", got)
	}
	plain := NewNode("c", 0, 0, 4, "H100", 0)
	if got := pickWhole(&plain, []int{1, 2, 3}, 2); got[0] != 1 || got[1] != 2 {
		t.Fatalf("no topology: got %v, want the lowest positions [1 2]", got)
	}
}

// TestPodFitMatchesUnits checks the chooser's one-pass check against the
// feasibility units and usableGPUs on random nodes and pods.
func TestPodFitMatchesUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for trial := 0; trial < 50; trial++ {
		c := mixedCluster(rng, 40)
		for i := range c.Nodes {
			if n := &c.Nodes[i]; rng.IntN(3) == 0 { // a pod limit, some full
				n.Pods = int64(1 + rng.IntN(3))
				n.FreePods = int64(rng.IntN(int(n.Pods) + 1))
			}
		}
		pods := randomPods(rng, 40)
		for i := range pods {
			p := &pods[i]
			switch rng.IntN(6) {
			case 0: // memory-only share
				p.GPU.ComputeMilli, p.GPU.ComputeLimitMilli, p.GPU.MemoryMiB, p.GPU.Count = 0, 0, int64(1+rng.IntN(20000)), 1
			case 1:
				p.GPU.Exclusive = p.GPU.Count > 0
			case 2:
				p.GPU.MIGProfile = "1g.10gb"
			case 3:
				p.GPU.MemoryMiB = int64(rng.IntN(20000))
			}
			p.Slot = rng.IntN(2) == 0
			pf := newPodFit(p)
			for ni := range c.Nodes {
				n := &c.Nodes[ni]
				got, ok := pf.fit([]int{-1}, n)
				if ok != feasible(n, p) {
					t.Fatalf("pod %+v on node %+v: fit %v, feasible %v", p, n, ok, !ok)
				}
				want := []int{-1}
				if ok {
					want = usableGPUs(want, n, p)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("pod %+v on node %+v: fit lists %v, usableGPUs %v", p, n, got, want)
				}
			}
		}
	}
}
