package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// openbLike builds n nodes with the openb cluster's mix of node types and
// fills them to about half with a seeded mix of pods.
func openbLike(n int) (*Cluster, Distribution) {
	types := []struct {
		cpu, mem int64
		gpus     int
		model    string
		weight   int
	}{{96000, 393216, 8, "G2", 549}, {104000, 524288, 2, "T4", 387}, {16000, 122880, 2, "P100", 107}, {128000, 786432, 8, "G3", 39}, {32000, 131072, 4, "V100M16", 28}, {96000, 786432, 8, "V100M32", 21}}
	total := 0
	for _, t := range types {
		total += t.weight
	}
	rng := rand.New(rand.NewPCG(1, 2))
	c := &Cluster{}
	for i := 0; i < n; i++ {
		k := rng.IntN(total)
		for _, t := range types {
			if k -= t.weight; k < 0 {
				c.Nodes = append(c.Nodes, NewNode(fmt.Sprintf("n%d", i), t.cpu, t.mem, t.gpus, t.model, 0))
				break
			}
		}
	}
	var pods []Pod
	for _, m := range []int64{810, 470, 320, 650, 230, 1000, 1000, 1000} {
		pods = append(pods, sharePod("s", 8000, m))
	}
	pods = append(pods, wholePod("w2", 16000, 2), cpuPod("c", 12000))
	d := TypicalShapes(pods, 1)
	var buf []int
	for i := 0; i < 2*n; i++ { // about half the GPU capacity, placed at random
		p := pods[rng.IntN(len(pods))]
		ni := rng.IntN(n)
		nd := &c.Nodes[ni]
		if feasible(nd, &p) {
			buf = usableGPUs(buf[:0], nd, &p)
			_ = c.Apply(&p, Decision{Node: ni, GPUs: defaultGPUs(nd, &p, buf)})
		}
	}
	return c, d
}

func BenchmarkPlace(b *testing.B) {
	for _, nodes := range []int{1213, 5000, 20000} {
		c, d := openbLike(nodes)
		for _, name := range []string{"bestfit", "fgd", "tessera"} {
			for _, pod := range []Pod{sharePod("share", 8000, 470), wholePod("whole", 12000, 1)} {
				b.Run(fmt.Sprintf("nodes=%d/%s/%s", nodes, name, pod.Name), func(b *testing.B) {
					pol, _ := New(name, Options{Seed: 1, Typical: d})
					for b.Loop() {
						if _, err := pol.Place(c, &pod); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
