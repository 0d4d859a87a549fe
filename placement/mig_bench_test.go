package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
// same size (tessera, 470m share, sequential and auto scoring).
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
