package placement

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func randomCluster(rng *rand.Rand) *Cluster {
	models := []string{"A", "B", "C"}
	c := &Cluster{}
	for i := 0; i < 5+rng.IntN(20); i++ {
		gpus := []int{0, 1, 2, 4, 8}[rng.IntN(5)]
		n := NewNode("n", int64(8000+rng.IntN(8)*8000), int64(32768+rng.IntN(8)*32768), gpus, models[rng.IntN(3)], []int64{0, 16384}[rng.IntN(2)])
		if gpus >= 2 && rng.IntN(2) == 0 {
			n.NVLinks = make([][]int, gpus)
			for a := range n.NVLinks {
				n.NVLinks[a] = make([]int, gpus)
			}
			n.NVLinks[0][1], n.NVLinks[1][0] = 4, 4
			for g := range n.GPUs {
				n.GPUs[g].NUMANode = g % 2
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

func randomPods(rng *rand.Rand, k int) []Pod {
	pods := make([]Pod, k)
	for i := range pods {
		cpu := int64(rng.IntN(16000))
		switch rng.IntN(4) {
		case 0:
			pods[i] = cpuPod("c", cpu)
		case 1:
			pods[i] = sharePod("s", cpu, int64(50+rng.IntN(19)*50))
		case 2:
			pods[i] = wholePod("w", cpu, []int{1, 2, 4, 8}[rng.IntN(4)])
		default:
			pods[i] = wholePod("m", cpu, 1, []string{"A", "B"}[:1+rng.IntN(2)]...)
			if rng.IntN(2) == 0 {
				pods[i].GPU.ComputeMilli, pods[i].GPU.ComputeLimitMilli = 300, 300
			}
		}
		pods[i].MemoryMiB = int64(rng.IntN(40000))
	}
	return pods
}

func checkInvariants(t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		if n.FreeCPUMilli < 0 || n.FreeCPUMilli > n.CPUMilli || n.FreeMemoryMiB < 0 || n.FreeMemoryMiB > n.MemoryMiB ||
			n.FreePods < 0 || n.FreePods > n.Pods {
			t.Fatalf("node over-allocated: %+v", n)
		}
		for _, g := range n.GPUs {
			if g.FreeMilli < 0 || g.FreeMilli > request.Whole || g.FreeMemoryMiB < 0 || g.FreeMemoryMiB > g.MemoryMiB {
				t.Fatalf("GPU over-allocated: %+v", g)
			}
		}
	}
}

// replayAll places pods in order, checking after each step that the policy
// left the snapshot untouched, that the decision satisfies the request and
// that nothing is over-allocated. It returns the decisions.
func replayAll(t *testing.T, name string, seed uint64, c *Cluster, pods []Pod) []Decision {
	pol, err := New(name, Options{Seed: seed, Typical: TypicalShapes(pods, 0.95)})
	if err != nil {
		t.Fatal(err)
	}
	var out []Decision
	for i := range pods {
		p := &pods[i]
		if o, ok := pol.(Observer); ok {
			o.Observe(p)
		}
		before := c.Clone()
		d, err := pol.Place(c, p)
		if !reflect.DeepEqual(before.Nodes, c.Nodes) {
			t.Fatalf("%s: Place changed the snapshot", name)
		}
		if err != nil {
			out = append(out, Decision{Node: -1})
			continue
		}
		n := &c.Nodes[d.Node]
		for _, gi := range d.GPUs {
			if !modelAllowed(p, n.GPUs[gi].Model) {
				t.Fatalf("%s: pod allowing %v placed on a %s GPU", name, p.GPU.Models, n.GPUs[gi].Model)
			}
		}
		if err := c.Apply(p, d); err != nil {
			t.Fatalf("%s: infeasible decision: %v", name, err)
		}
		checkInvariants(t, c)
		out = append(out, Decision{Node: d.Node, GPUs: slices.Clone(d.GPUs)})
	}
	return out
}

func TestPropertyPoliciesNeverOverAllocate(t *testing.T) {
	for trial := uint64(0); trial < 8; trial++ {
		rng := rand.New(rand.NewPCG(trial, 1))
		c := randomCluster(rng)
		pods := randomPods(rng, 150)
		for _, name := range Names() {
			replayAll(t, name, trial, c.Clone(), pods)
		}
	}
}

func TestPropertySeedDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	c := randomCluster(rng)
	pods := randomPods(rng, 120)
	for _, name := range Names() {
		a := replayAll(t, name, 5, c.Clone(), pods)
		b := replayAll(t, name, 5, c.Clone(), pods)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed 5 differ", name)
		}
	}
}
