package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/inventory"
)

// migCluster builds n nodes of 8 managed A100-80GB and fills about half
// their slices with a seeded mix of instances placed first fit.
func migCluster(b *testing.B, n int) *Cluster {
	var nodes []inventory.Node
	for i := 0; i < n; i++ {
		nodes = append(nodes, migInv(fmt.Sprintf("n%d", i), "A100-80GB", 8, true))
	}
	c, err := FromInventory(nodes)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 8*n; k++ {
		prof := streamProfiles[rng.IntN(4)]
		ni := rng.IntN(n)
		p := migPod("fill", prof, 1)
		one := &Cluster{Nodes: c.Nodes[ni : ni+1]}
		if d, err := (&chooser{}).chooseMIG(one, &p, firstFit{}); err == nil {
			d.Node = 0
			_ = one.Apply(&p, d)
		}
	}
	return c
}

// BenchmarkPlaceMIG times one MIG decision of the default policy (planner
// and first fit) at 1,213 and 5,000 nodes of 8 managed A100-80GB, beside
// the fractional decision of BenchmarkPlace's openb-like cluster of the
// same size (tessera, 470m share, sequential and auto scoring). The MIG
// cluster was filled on one-node views, so it has no change log and every
// MIG decision here asks each node (migcache.go), while the fractional one
// scores by class; BenchmarkMIGVsFractional compares the two alike.
func BenchmarkPlaceMIG(b *testing.B) {
	for _, nodes := range []int{1213, 5000} {
		c := migCluster(b, nodes)
		d := streamDist(streamMixes[0])
		for _, prof := range []string{"1g.10gb", "3g.40gb"} {
			pod := migPod("mig", prof, 1)
			for _, ff := range []bool{false, true} {
				name := "planner"
				if ff {
					name = "firstfit"
				}
				b.Run(fmt.Sprintf("nodes=%d/mig/%s/%s", nodes, prof, name), func(b *testing.B) {
					pol, _ := New("tessera", Options{Seed: 1, Typical: d, MIGFirstFit: ff})
					for b.Loop() {
						if _, err := pol.Place(c, &pod); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		oc, od := openbLike(nodes)
		share := sharePod("share", 8000, 470)
		for _, w := range []int{1, 0} {
			b.Run(fmt.Sprintf("nodes=%d/fractional/workers=%d", nodes, w), func(b *testing.B) {
				pol, _ := New("tessera", Options{Seed: 1, Typical: od, Workers: w})
				for b.Loop() {
					if _, err := pol.Place(oc, &share); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMIGVsFractional is the issue's speed target, "a MIG decision
// takes no longer than a fractional one at 5,000 nodes", measured in one
// run: each iteration makes one MIG decision of the default policy (its
// planner, a 1g.10gb or a 3g.40gb request in turn, on 5,000 nodes of 8
// managed A100-80GB about half full) and one fractional decision (a 470m
// share on the openb-like cluster of 5,000 nodes, about half full), timing
// each alone, so that the machine's load falls on both alike. It reports
// ns/mig, ns/fractional and their ratio mig/fractional (the target: at
// most 1).
//
//   - live: each decision is applied and then released (not timed), so
//     the next one sees a cluster where one node changed, as a scheduler's
//     next decision does; both policies keep what they know of the nodes
//     (the fractional classes, the MIG node offers and their order),
//     learned in one untimed decision of each kind first;
//   - cold: each decision is made on a view of the cluster without a
//     change log, so both ask every node (as a scheduler's first decision
//     on a fresh snapshot does).
//
// Fractional scoring is sequential (workers=1) or as the policy chooses
// (workers=0: parallel when that is measured to pay); MIG decisions are
// sequential.
func BenchmarkMIGVsFractional(b *testing.B) {
	const nodes = 5000
	mc := migCluster(b, nodes)
	mc.Changed(0) // give it a change log, as a cluster decisions are applied to has
	oc, od := openbLike(nodes)
	for _, live := range []bool{true, false} {
		for _, w := range []int{1, 0} {
			mode := "cold"
			if live {
				mode = "live"
			}
			b.Run(fmt.Sprintf("nodes=%d/%s/workers=%d", nodes, mode, w), func(b *testing.B) {
				mpol, _ := New("tessera", Options{Seed: 1, Typical: streamDist(streamMixes[0])})
				fpol, _ := New("tessera", Options{Seed: 1, Typical: od, Workers: w})
				pods := []Pod{migPod("mig", "1g.10gb", 1), migPod("mig", "3g.40gb", 1)}
				share := sharePod("share", 8000, 470)
				if live {
					// Untimed: each policy's first decision of each kind
					// learns every node (what cold times); live times the
					// decisions after it.
					for k := range pods {
						d, err := mpol.Place(mc, &pods[k])
						if err != nil {
							b.Fatal(err)
						}
						if err := errorsJoin(mc.Apply(&pods[k], d), mc.Release(&pods[k], d)); err != nil {
							b.Fatal(err)
						}
					}
					e, err := fpol.Place(oc, &share)
					if err != nil {
						b.Fatal(err)
					}
					if err := errorsJoin(oc.Apply(&share, e), oc.Release(&share, e)); err != nil {
						b.Fatal(err)
					}
				}
				var tm, tf time.Duration
				n := 0
				for b.Loop() {
					p := &pods[n%2]
					mv, ov := mc, oc
					if !live {
						mv, ov = &Cluster{Nodes: mc.Nodes}, &Cluster{Nodes: oc.Nodes}
					}
					t0 := time.Now()
					d, err := mpol.Place(mv, p)
					tm += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					t0 = time.Now()
					e, err := fpol.Place(ov, &share)
					tf += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if live {
						if err := errorsJoin(mc.Apply(p, d), mc.Release(p, d), oc.Apply(&share, e), oc.Release(&share, e)); err != nil {
							b.Fatal(err)
						}
					}
					n++
				}
				b.ReportMetric(float64(tm.Nanoseconds())/float64(n), "ns/mig")
				b.ReportMetric(float64(tf.Nanoseconds())/float64(n), "ns/fractional")
				b.ReportMetric(float64(tm)/float64(tf), "mig/fractional")
			})
		}
	}
}

// errorsJoin returns the first non-nil error.
func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
