package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
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

// BenchmarkPlace times one decision per operation, scoring on one
// goroutine (seq) and as New builds the policy by default (auto: on up to
// GOMAXPROCS goroutines above parallelMinNodes nodes while that is
// measured faster, so auto is seq at 1,213 nodes).
func BenchmarkPlace(b *testing.B) {
	for _, nodes := range []int{1213, 5000, 20000} {
		c, d := openbLike(nodes)
		for _, name := range []string{"bestfit", "fgd", "tessera"} {
			for _, pod := range []Pod{sharePod("share", 8000, 470), wholePod("whole", 12000, 1)} {
				for _, mode := range []struct {
					name    string
					workers int
				}{{"seq", 1}, {"auto", 0}} {
					b.Run(fmt.Sprintf("nodes=%d/%s/%s/%s", nodes, name, pod.Name, mode.name), func(b *testing.B) {
						pol, _ := New(name, Options{Seed: 1, Typical: d, Workers: mode.workers})
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
}

// BenchmarkDecisionLatency measures the latency distribution of one
// decision against the target (median under 1 ms, p99 under 10 ms
// at 5,000 nodes). Each iteration asks three instances of the policy in
// turn, rotating which goes first so all see the same machine load:
// seq scores on one goroutine, par always on GOMAXPROCS goroutines (at
// least two), auto is the default (parallel while measured faster). It
// reports the median and p99 of each in µs and the ratios to seq (below
// 1: faster than sequential). The pod alternates between a 470m sharing
// pod and a 1-GPU pod; four untimed decisions per instance warm its
// fragmentation memo first.
func BenchmarkDecisionLatency(b *testing.B) {
	for _, nodes := range []int{1213, 5000, 20000} {
		c, d := openbLike(nodes)
		for _, name := range []string{"bestfit", "fgd", "tessera"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, name), func(b *testing.B) {
				modes := []string{"seq", "par", "auto"}
				var pols []Policy
				for _, w := range []int{1, max(2, runtime.GOMAXPROCS(0)), 0} {
					pol, _ := New(name, Options{Seed: 1, Typical: d, Workers: w})
					pols = append(pols, pol)
				}
				pods := []Pod{sharePod("share", 8000, 470), wholePod("whole", 12000, 1)}
				for _, pol := range pols { // warm the memos, as in a running scheduler
					for k := range 4 {
						if _, err := pol.Place(c, &pods[k%2]); err != nil {
							b.Fatal(err)
						}
					}
				}
				times := make([][]time.Duration, len(pols))
				i := 0
				for b.Loop() {
					pod := &pods[i%2]
					var first Decision
					for k := range pols {
						m := (k + i/2) % len(pols)
						start := time.Now()
						dec, err := pols[m].Place(c, pod)
						times[m] = append(times[m], time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if k == 0 {
							first = dec
						} else if !reflect.DeepEqual(first, dec) {
							b.Fatalf("%s decided %+v, another way %+v", modes[m], dec, first)
						}
					}
					i++
				}
				s50, s99 := percentiles(times[0])
				b.ReportMetric(s50, "seq-p50-µs")
				b.ReportMetric(s99, "seq-p99-µs")
				for m := 1; m < len(modes); m++ {
					p50, p99 := percentiles(times[m])
					b.ReportMetric(p50, modes[m]+"-p50-µs")
					b.ReportMetric(p99, modes[m]+"-p99-µs")
					b.ReportMetric(p50/s50, modes[m]+"/seq-p50")
					b.ReportMetric(p99/s99, modes[m]+"/seq-p99")
				}
			})
		}
	}
}

// percentiles returns the median and the 99th percentile of ds in µs
// (nearest rank).
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return float64(s[max(0, i)].Nanoseconds()) / 1e3
	}
	return at(0.50), at(0.99)
}
