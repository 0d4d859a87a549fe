package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
)

// TestMIGMemoDecidesAsNodeByNode: over random streams of MIG requests
// (some with allowed models, some for two GPUs), releases and hand
// changes reported with Changed, a policy that remembers node offers
// between decisions decides exactly as a fresh policy asking every node
// on a view without a change log, under the planner and under first fit.
func TestMIGMemoDecidesAsNodeByNode(t *testing.T) {
	profiles := []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me"}
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 21))
		var nodes []inventory.Node
		for i := 0; i < 12; i++ {
			model := "A100-80GB"
			if i%3 == 0 {
				model = "H100-SXM"
			}
			n := migInv(fmt.Sprintf("n%d", i), model, 4, i%4 != 1)
			if i%4 == 1 { // static GPUs with a layout
				for g := range n.GPUs {
					n.GPUs[g].MIGInstances = []inventory.MIGInstance{inst("3g.40gb", 4, fmt.Sprintf("MIG-%d-%d-a", i, g), false), inst("1g.10gb", 0, fmt.Sprintf("MIG-%d-%d-b", i, g), false)}
				}
			}
			n.CPUMilli = int64(8000 + 4000*(i%3))
			nodes = append(nodes, n)
		}
		c := cluster(t, nodes...)
		d := streamDist(streamMixes[seed%uint64(len(streamMixes))])
		kinds := []struct {
			name  string
			fresh func() Policy
		}{
			{"planner", func() Policy { return NewTessera(d, seed) }},
			{"first fit", func() Policy { return NewFirstFit() }},
		}
		kept := []Policy{kinds[0].fresh(), kinds[1].fresh()}
		var live []booked
		for step := 0; step < 400; step++ {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			switch r := rng.Float64(); {
			case r < 0.25 && len(live) > 0:
				k := rng.IntN(len(live))
				if err := c.Release(&live[k].p, live[k].d); err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				live = append(live[:k], live[k+1:]...)
				continue
			case r < 0.3: // a hand change (CPU taken outside the engine), reported
				ni := rng.IntN(len(c.Nodes))
				c.Nodes[ni].FreeCPUMilli -= rng.Int64N(c.Nodes[ni].FreeCPUMilli/2 + 1)
				c.Changed(ni)
				continue
			}
			p := migPod(label, profiles[rng.IntN(len(profiles))], 1+rng.IntN(4)/3)
			if rng.IntN(5) == 0 {
				p.GPU.Models = []string{"H100-SXM"}
			}
			k := rng.IntN(len(kinds))
			got, gerr := kept[k].Place(c, &p)
			view := &Cluster{Nodes: c.Nodes} // no change log: asked node by node
			want, werr := kinds[k].fresh().Place(view, &p)
			if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: remembered %+v (%v), node by node %+v (%v)", label, kinds[k].name, got, gerr, want, werr)
			}
			if gerr != nil {
				continue
			}
			if err := c.Apply(&p, got); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			live = append(live, booked{p, got})
		}
	}
}
