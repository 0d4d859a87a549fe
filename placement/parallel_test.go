package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// mixedCluster is a cluster of about n random nodes (randomCluster's kinds)
// plus nodes the memo leaves out (mixed models, 16 GPUs), filled to about
// half at random.
func mixedCluster(rng *rand.Rand, n int) *Cluster {
	c := &Cluster{}
	for len(c.Nodes) < n {
		c.Nodes = append(c.Nodes, randomCluster(rng).Nodes...)
		if rng.IntN(4) == 0 {
			m := NewNode("mixed", 64000, 1<<18, 4, "A", 16384)
			m.GPUs[1].Model, m.GPUs[3].Model = "B", "C"
			c.Nodes = append(c.Nodes, m)
		}
		if rng.IntN(8) == 0 {
			c.Nodes = append(c.Nodes, NewNode("big", 128000, 1<<19, 16, "B", 0))
		}
	}
	for i, p := range randomPods(rng, n) {
		ni := rng.IntN(len(c.Nodes))
		nd := &c.Nodes[ni]
		if i%3 == 0 {
			p.GPU.ComputeMilli, p.GPU.ComputeLimitMilli, p.GPU.MemoryMiB = 0, 0, 4096 // memory-only share
			p.GPU.Count = 1
		}
		if feasible(nd, &p) {
			_ = c.Apply(&p, Decision{Node: ni, GPUs: defaultGPUs(nd, &p, usableGPUs(nil, nd, &p))})
		}
	}
	return c
}

// TestParallelMatchesSequential replays random pods on random clusters with
// two instances of every policy, one scoring sequentially and one on four
// goroutines with small chunks, both node by node (not by class); every
// decision (node, GPUs, error) must be the same.
func TestParallelMatchesSequential(t *testing.T) {
	for _, name := range Names() {
		for _, learn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/learn=%v", name, learn), func(t *testing.T) {
				for seed := uint64(1); seed <= 3; seed++ {
					rng := rand.New(rand.NewPCG(seed, 77))
					c := mixedCluster(rng, 80+rng.IntN(120))
					pods := randomPods(rng, 120)
					o := Options{Seed: seed}
					if !learn {
						o.Typical = TypicalShapes(pods, 0.95)
					}
					o.Workers = 1
					seq, err := New(name, o)
					if err != nil {
						t.Fatal(err)
					}
					o.Workers = 4
					par, _ := New(name, o)
					chooserOf(par).tuning = parallelTuning{minNodes: 2, chunk: 8, fixed: true}
					chooserOf(seq).class.off = true // node by node both ways
					chooserOf(par).class.off = true
					cs, cp := c, c.Clone()
					went := 0
					for i := range pods {
						pod := pods[i]
						if i%5 == 0 {
							pod.GPU.ComputeMilli, pod.GPU.ComputeLimitMilli, pod.GPU.MemoryMiB, pod.GPU.Count = 0, 0, 2048, 1
						}
						if ob, ok := seq.(Observer); ok {
							ob.Observe(&pod)
							par.(Observer).Observe(&pod)
						}
						ds, es := seq.Place(cs, &pod)
						if chooserOf(par).parallelWorkers(len(cp.Nodes)) > 1 {
							went++
						}
						dp, ep := par.Place(cp, &pod)
						if !reflect.DeepEqual(ds, dp) || fmt.Sprint(es) != fmt.Sprint(ep) {
							t.Fatalf("seed %d pod %d: sequential %+v, %v; parallel %+v, %v", seed, i, ds, es, dp, ep)
						}
						if es == nil {
							if err := cs.Apply(&pod, ds); err != nil {
								t.Fatal(err)
							}
							if err := cp.Apply(&pod, dp); err != nil {
								t.Fatal(err)
							}
						}
					}
					if name != "random" && went == 0 {
						t.Fatalf("seed %d: no decision was scored in parallel", seed)
					}
				}
			})
		}
	}
}

// TestParallelMergeMatchesSequential drives the two choosers with made-up
// scores: few distinct values (many ties), NaN anywhere (also first),
// infeasible runs, and a cluster that changes size (the tie order is
// drawn again).
func TestParallelMergeMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for trial := 0; trial < 400; trial++ {
		n := 1 + rng.IntN(300)
		c := &Cluster{Nodes: make([]Node, n)}
		for i := range c.Nodes {
			c.Nodes[i] = NewNode(fmt.Sprint("n", i), 1000, 0, 1, "A", 0)
			if rng.IntN(3) == 0 {
				c.Nodes[i].FreeCPUMilli = 0 // infeasible for the pod below
			}
		}
		scores := make([]float64, n)
		for i := range scores {
			switch k := rng.IntN(20); {
			case k == 0:
				scores[i] = math.NaN()
			case k == 1:
				scores[i] = math.Inf(-1)
			case k == 2:
				scores[i] = math.Copysign(0, -1)
			default:
				scores[i] = float64(rng.IntN(4))
			}
		}
		score := func(_ *Cluster, ni int, _ *Pod, usable []int) (float64, []int) {
			return scores[ni], []int{ni, len(usable)}
		}
		pod := sharePod("p", 500, 100)
		pf := newPodFit(&pod)
		seq, par := newChooser(uint64(trial)), newChooser(uint64(trial))
		par.tuning = parallelTuning{minNodes: 1, chunk: 1 + rng.IntN(40)}
		par.workers = 1 + rng.IntN(5)
		for round := 0; round < 3; round++ {
			if round == 1 { // draw the tie order even where no tie was met
				seq.ranked(c, 0)
				par.ranked(c, 0)
			}
			want := seq.chooseSequential(c, &pf, score, nil)
			var got Decision
			if w := par.parallelWorkers(n); w > 1 {
				got = par.chooseParallel(c, &pf, score, w)
			} else {
				got = par.chooseSequential(c, &pf, score, nil)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("trial %d round %d (%d nodes): sequential %+v, parallel %+v; scores %v", trial, round, n, want, got, scores)
			}
		}
	}
}
