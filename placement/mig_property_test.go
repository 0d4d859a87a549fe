package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// checkMIGLayouts fails when a MIG GPU of c holds an invalid layout or
// free figures that do not follow its instances in use.
func checkMIGLayouts(t *testing.T, c *Cluster, step string) {
	t.Helper()
	for ni := range c.Nodes {
		for gi := range c.Nodes[ni].GPUs {
			g := &c.Nodes[ni].GPUs[gi]
			if g.MIG == nil || g.MIG.Spec == nil {
				continue
			}
			var layout []catalog.MIGPlacement
			for _, in := range g.MIG.Instances {
				if in.Start < 0 {
					t.Fatalf("%s: node %d GPU %d: instance %+v without a start", step, ni, gi, in)
				}
				layout = append(layout, catalog.MIGPlacement{Profile: in.Profile, Start: in.Start})
			}
			if err := g.MIG.Spec.CheckLayout(layout); err != nil {
				t.Fatalf("%s: node %d GPU %d: %v (%v)", step, ni, gi, err, layout)
			}
			want := *g
			want.MIG = g.MIG.clone()
			migFree(&want)
			if want.migSum != g.migSum {
				t.Fatalf("%s: node %d GPU %d: stale MIG summary %+v, instances say %+v", step, ni, gi, g.migSum, want.migSum)
			}
			if want.FreeMilli != g.FreeMilli || want.FreeMemoryMiB != g.FreeMemoryMiB {
				t.Fatalf("%s: node %d GPU %d: free %d/%d, instances say %d/%d", step, ni, gi, g.FreeMilli, g.FreeMemoryMiB, want.FreeMilli, want.FreeMemoryMiB)
			}
		}
	}
}

type booked struct {
	p Pod
	d Decision
}

// TestMIGRandomLayoutsStayValid: random sequences of placements (planner
// and first fit), releases and arbitrary create decisions never leave an
// overlapping or invalid layout, and a refused decision changes nothing.
func TestMIGRandomLayoutsStayValid(t *testing.T) {
	cat := catalog.Default()
	models := []string{"A30", "A100-40GB", "A100-80GB", "H100-SXM", "H200", "B200"}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var nodes []inventory.Node
		for i, m := range models {
			nodes = append(nodes, migInv(fmt.Sprintf("n%d", i), m, 2, true))
		}
		c := cluster(t, nodes...)
		planner := NewTessera(nil, seed)
		first, _ := New("bestfit", Options{Seed: seed})
		var live []booked
		for step := 0; step < 300; step++ {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			switch r := rng.Float64(); {
			case r < 0.5: // a request, placed by a policy
				m, _ := cat.Lookup(models[rng.IntN(len(models))])
				prof := m.MIG.Profiles[rng.IntN(len(m.MIG.Profiles))].Name
				p := migPod(label, prof, 1+rng.IntN(2))
				var pol Policy = planner
				if rng.IntN(2) == 0 {
					pol = first
				}
				d, err := pol.Place(c, &p)
				if err != nil {
					continue
				}
				if err := c.Apply(&p, d); err != nil {
					t.Fatalf("%s: the policy's decision does not apply: %v", label, err)
				}
				live = append(live, booked{p, d})
			case r < 0.8 && len(live) > 0: // a release
				k := rng.IntN(len(live))
				if err := c.Release(&live[k].p, live[k].d); err != nil {
					t.Fatalf("%s: release: %v", label, err)
				}
				live = append(live[:k], live[k+1:]...)
			default: // an arbitrary create decision, valid or not
				ni := rng.IntN(len(c.Nodes))
				g := &c.Nodes[ni].GPUs[rng.IntN(2)]
				spec := g.MIG.Spec
				q := rng.IntN(len(spec.Profiles))
				start := rng.IntN(spec.MemorySlices)
				p := migPod(label, spec.Profiles[q].Name, 1)
				d := Decision{Node: ni, GPUs: []int{g.Index}, MIG: []MIGChoice{{Start: start, Create: true}}}
				used, media, _ := g.MIG.occupancy()
				valid := spec.CanPlace(used, media, q, start) == ""
				before := c.Clone()
				err := c.Apply(&p, d)
				if (err == nil) != valid {
					t.Fatalf("%s: create %s@%d: error %v, valid by the catalog %v", label, spec.Profiles[q].Name, start, err, valid)
				}
				if err != nil {
					checkUnchanged(t, before, c, label)
				} else {
					live = append(live, booked{p, d})
				}
			}
			checkMIGLayouts(t, c, label)
		}
		for len(live) > 0 {
			if err := c.Release(&live[0].p, live[0].d); err != nil {
				t.Fatalf("seed %d: final release: %v", seed, err)
			}
			live = live[1:]
		}
		for ni := range c.Nodes {
			for _, g := range c.Nodes[ni].GPUs {
				if len(g.MIG.Instances) != 0 || g.FreeMilli != request.Whole {
					t.Fatalf("seed %d: node %d GPU %d left %+v", seed, ni, g.Index, g.MIG.Instances)
				}
			}
		}
	}
}

func checkUnchanged(t *testing.T, before, after *Cluster, label string) {
	t.Helper()
	for ni := range before.Nodes {
		for gi := range before.Nodes[ni].GPUs {
			a, b := &before.Nodes[ni].GPUs[gi], &after.Nodes[ni].GPUs[gi]
			if a.FreeMilli != b.FreeMilli || len(a.MIG.Instances) != len(b.MIG.Instances) {
				t.Fatalf("%s: a refused decision changed node %d GPU %d", label, ni, gi)
			}
		}
	}
}

// migStream is a random MIG request stream with departures: it returns
// how many requests were placed before the first refusal.
func migStream(t testing.TB, pol Policy, seed uint64, weights []float64, profiles []string) int {
	var nodes []inventory.Node
	for i := 0; i < 8; i++ {
		nodes = append(nodes, migInv(fmt.Sprintf("n%d", i), "A100-80GB", 8, true))
	}
	c, err := FromInventory(nodes)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	var live []booked
	placed := 0
	for step := 0; ; step++ {
		if len(live) > 0 && rng.Float64() < 0.3 {
			k := rng.IntN(len(live))
			if err := c.Release(&live[k].p, live[k].d); err != nil {
				t.Fatal(err)
			}
			live = append(live[:k], live[k+1:]...)
			continue
		}
		x, prof := rng.Float64(), profiles[len(profiles)-1]
		for i, w := range weights {
			if x < w {
				prof = profiles[i]
				break
			}
			x -= w
		}
		p := migPod(fmt.Sprint(step), prof, 1)
		d, err := pol.Place(c, &p)
		if err != nil {
			return placed
		}
		if err := c.Apply(&p, d); err != nil {
			t.Fatal(err)
		}
		live = append(live, booked{p, d})
		placed++
	}
}

// streamProfiles are the A100-80GB profiles of the random streams;
// streamMixes their request shares (a mix per stream: balanced, mostly
// small, large-heavy, 1g with 3g, 1g with 4g and 7g).
var (
	streamProfiles = []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	streamMixes    = [][]float64{
		{0.35, 0.1, 0.2, 0.15, 0.1, 0.1},
		{0.6, 0.1, 0.1, 0.1, 0.05, 0.05},
		{0.2, 0.1, 0.2, 0.2, 0.2, 0.1},
		{0.5, 0, 0, 0.5, 0, 0},
		{0.4, 0, 0, 0, 0.4, 0.2},
	}
)

// streamDist is the typical distribution of a mix.
func streamDist(weights []float64) Distribution {
	var d Distribution
	for i, p := range streamProfiles {
		if weights[i] > 0 {
			d = append(d, Typical{Shape: Shape{GPUCount: 1, MIGProfile: p, CPUMilli: 1000}, Weight: weights[i]})
		}
	}
	return d
}

// plannerVsFirstFit runs seeds 1..seeds of a mix under the planner and
// under first fit and returns the requests each placed before its first
// refusal, summed.
func plannerVsFirstFit(t testing.TB, weights []float64, seeds uint64) (planner, first int) {
	d := streamDist(weights)
	for seed := uint64(1); seed <= seeds; seed++ {
		planner += migStream(t, NewTessera(d, seed), seed, weights, streamProfiles)
		ff, err := New("tessera", Options{Typical: d, Seed: seed, MIGFirstFit: true})
		if err != nil {
			t.Fatal(err)
		}
		first += migStream(t, ff, seed, weights, streamProfiles)
	}
	return planner, first
}

// TestMIGPlannerBeatsFirstFit: on every mix, over seeds 1-10 of the random
// stream (8 nodes of 8 managed A100-80GB, 30% of the steps a departure),
// the planner places more requests before the first refusal than first
// fit.
func TestMIGPlannerBeatsFirstFit(t *testing.T) {
	for _, w := range streamMixes {
		planner, first := plannerVsFirstFit(t, w, 10)
		t.Logf("mix %v: placed before the first refusal: planner %d, first fit %d (%.3f)", w, planner, first, float64(planner)/float64(first))
		if planner <= first {
			t.Errorf("mix %v: planner placed %d, first fit %d", w, planner, first)
		}
	}
}

// BenchmarkMIGPlannerVsFirstFit reports, per mix, the requests placed
// before the first refusal by the planner and by first fit (seeds 1-20
// per operation) and their ratio.
func BenchmarkMIGPlannerVsFirstFit(b *testing.B) {
	for k, w := range streamMixes {
		b.Run(fmt.Sprintf("mix%d", k), func(b *testing.B) {
			var planner, first int
			for i := 0; i < b.N; i++ {
				p, f := plannerVsFirstFit(b, w, 20)
				planner += p
				first += f
			}
			b.ReportMetric(float64(planner)/float64(b.N), "planner-placed/op")
			b.ReportMetric(float64(first)/float64(b.N), "firstfit-placed/op")
			b.ReportMetric(float64(planner)/float64(first), "planner/firstfit")
		})
	}
}
