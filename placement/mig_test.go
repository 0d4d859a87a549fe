package placement

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// migInv is an inventory node of count GPUs of model in MIG mode.
func migInv(name, model string, count int, managed bool, instances ...[]inventory.MIGInstance) inventory.Node {
	m, _ := catalog.Default().Lookup(model)
	n := inventory.Node{Name: name, CPUMilli: 64000, MemoryMiB: 512 << 10}
	for i := 0; i < count; i++ {
		g := inventory.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Index: i, Model: model, MemoryMiB: m.MemoryMiB,
			MIGMode: inventory.MIGEnabled, MIGManaged: managed, NUMANode: -1, Health: inventory.Healthy}
		if i < len(instances) {
			g.MIGInstances = instances[i]
		}
		n.GPUs = append(n.GPUs, g)
	}
	return n
}

func plainInv(name, model string, count int) inventory.Node {
	m, _ := catalog.Default().Lookup(model)
	n := inventory.Node{Name: name, CPUMilli: 64000, MemoryMiB: 512 << 10}
	for i := 0; i < count; i++ {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Index: i, Model: model,
			MemoryMiB: m.MemoryMiB, MIGMode: inventory.MIGDisabled, NUMANode: -1, Health: inventory.Healthy})
	}
	return n
}

func cluster(t *testing.T, nodes ...inventory.Node) *Cluster {
	t.Helper()
	c, err := FromInventory(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func migPod(name, profile string, count int, models ...string) Pod {
	return Pod{Name: name, CPUMilli: 1000, MemoryMiB: 1024, GPU: request.GPU{Count: count, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: profile, Models: models}}
}

func inst(profile string, start int, uuid string, inUse bool) inventory.MIGInstance {
	return inventory.MIGInstance{Profile: profile, Start: inventory.Slot(start), UUID: uuid, InUse: inUse}
}

func TestMIGFeasibility(t *testing.T) {
	share := Pod{Name: "s", GPU: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}}
	whole := Pod{Name: "w", GPU: request.GPU{Count: 1, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole}}
	cases := []struct {
		name string
		node inventory.Node
		pod  Pod
		unit Unit
		why  string // "" feasible
	}{
		{"no MIG GPU", plainInv("n", "H100-SXM", 2), migPod("p", "1g.10gb", 1), UnitMIG, "MIG profile 1g.10gb requested: the node has no GPU in MIG mode"},
		{"profile of another model", migInv("n", "H100-SXM", 1, true), migPod("p", "1g.5gb", 1), UnitMIG,
			"MIG profile 1g.5gb is not a profile of H100-SXM (H100-SXM has 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"},
		{"model not allowed", migInv("n", "H100-SXM", 1, true), migPod("p", "1g.10gb", 1, "A100-80GB"), UnitMIG, "no GPU in MIG mode of an allowed model"},
		{"managed, empty", migInv("n", "H100-SXM", 1, true), migPod("p", "3g.40gb", 1), 0, ""},
		{"static, free instance", migInv("n", "A100-80GB", 1, false, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-a", false)}), migPod("p", "3g.40gb", 1), 0, ""},
		{"static, instance in use", migInv("n", "A100-80GB", 1, false, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-a", true)}), migPod("p", "3g.40gb", 1), UnitMIG,
			"fewer than 1 GPUs in MIG mode with a free 3g.40gb instance or a free start slot"},
		{"static, no such instance", migInv("n", "A100-80GB", 1, false, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-a", false)}), migPod("p", "1g.10gb", 1), UnitMIG, "GPU 0 static [3g.40gb@4]"},
		{"managed, no start left", migInv("n", "A100-80GB", 1, true, []inventory.MIGInstance{inst("3g.40gb", 4, "MIG-a", true), inst("1g.10gb", 0, "MIG-b", true)}), migPod("p", "3g.40gb", 1), UnitMIG, "GPU 0 managed [3g.40gb@4* 1g.10gb@0*]"},
		{"two instances, one GPU", migInv("n", "A100-80GB", 1, true), migPod("p", "1g.10gb", 2), UnitMIG, "fewer than 2 GPUs"},
		{"two instances, two GPUs", migInv("n", "A100-80GB", 2, true), migPod("p", "1g.10gb", 2), 0, ""},
		{"share on MIG GPU", migInv("n", "A100-80GB", 1, true), share, UnitGPUs, "1 of the node's GPUs of an allowed model are in MIG mode"},
		{"whole on MIG GPU", migInv("n", "A100-80GB", 1, true), whole, UnitGPUs, "in MIG mode and take MIG requests only"},
	}
	for _, tc := range cases {
		c := cluster(t, tc.node)
		n := &c.Nodes[0]
		r, ok := Explain(n, &tc.pod)
		if ok != (tc.why == "") || (tc.why != "" && (r.Unit != tc.unit || !strings.Contains(r.Reason, tc.why))) {
			t.Errorf("%s: Explain = %v, %+v; want unit %d with %q", tc.name, ok, r, tc.unit, tc.why)
		}
		pf := newPodFit(&tc.pod)
		if _, fit := pf.fit(nil, n); fit != ok || feasible(n, &tc.pod) != ok {
			t.Errorf("%s: fit %v, feasible %v, Explain %v", tc.name, fit, feasible(n, &tc.pod), ok)
		}
		_, err := NewTessera(nil, 1).Place(c, &tc.pod)
		if (err == nil) != ok {
			t.Errorf("%s: Place error %v, feasible %v", tc.name, err, ok)
		}
	}
}

// TestMIGFigures: the GPU unit's figures count GPUs in MIG mode apart.
func TestMIGFigures(t *testing.T) {
	inv := plainInv("n", "A100-80GB", 2)
	inv.GPUs = append(inv.GPUs, migInv("m", "A100-80GB", 1, true).GPUs[0])
	inv.GPUs[2].Index, inv.GPUs[2].UUID = 2, "GPU-m"
	c := cluster(t, inv)
	p := Pod{Name: "w", GPU: request.GPU{Count: 3, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole}}
	r, ok := Explain(&c.Nodes[0], &p)
	if ok || r.GPUs.InMIGMode != 1 || r.GPUs.Usable() != 2 {
		t.Errorf("Explain = %v, %+v", ok, r)
	}
}

func TestMIGPrefersExistingInstance(t *testing.T) {
	c := cluster(t, migInv("n", "A100-40GB", 1, true, []inventory.MIGInstance{inst("1g.5gb", 3, "MIG-idle", false)}))
	p := migPod("p", "1g.5gb", 1)
	for _, pol := range []Policy{NewTessera(nil, 1), NewBestFit(1)} {
		d, err := pol.Place(c, &p)
		if err != nil || len(d.MIG) != 1 || d.MIG[0] != (MIGChoice{Start: 3, UUID: "MIG-idle"}) {
			t.Errorf("%s: %+v, %v; want the idle instance", pol.Name(), d, err)
		}
	}
}

func migDist(weights map[string]float64) Distribution {
	var d Distribution
	for prof, w := range weights {
		d = append(d, Typical{Shape: Shape{GPUCount: 1, MIGProfile: prof}, Weight: w})
	}
	return d
}

// TestMIGPlannerSlot: with 1g and 4g requests typical, the planner keeps
// start 0 (the only 4g start) free; first fit takes it.
func TestMIGPlannerSlot(t *testing.T) {
	d := migDist(map[string]float64{"1g.5gb": 0.5, "4g.20gb": 0.5})
	p := migPod("p", "1g.5gb", 1)
	c := cluster(t, migInv("n", "A100-40GB", 1, true))
	dec, err := NewTessera(d, 1).Place(c, &p)
	if err != nil || !dec.MIG[0].Create || dec.MIG[0].Start < 4 {
		t.Errorf("planner: %+v, %v; want a new 1g.5gb at start 4..6", dec, err)
	}
	ff, _ := New("tessera", Options{Typical: d, MIGFirstFit: true})
	dec, err = ff.Place(c, &p)
	if err != nil || dec.MIG[0] != (MIGChoice{Start: 0, Create: true}) {
		t.Errorf("first fit: %+v, %v; want start 0", dec, err)
	}
}

// TestMIGPlannerPacks: when 7g requests are typical, a 1g goes onto a GPU
// already split rather than an empty one.
func TestMIGPlannerPacks(t *testing.T) {
	d := migDist(map[string]float64{"1g.10gb": 0.5, "7g.80gb": 0.5})
	c := cluster(t, migInv("n", "H100-SXM", 2, true, nil, []inventory.MIGInstance{inst("3g.40gb", 0, "MIG-x", true)}))
	p := migPod("p", "1g.10gb", 1)
	dec, err := NewTessera(d, 1).Place(c, &p)
	if err != nil || dec.GPUs[0] != 1 {
		t.Errorf("%+v, %v; want GPU 1 (already split)", dec, err)
	}
}

func TestMIGApplyRelease(t *testing.T) {
	c := cluster(t, migInv("n", "A100-40GB", 2, true, []inventory.MIGInstance{inst("3g.20gb", 4, "MIG-a", false)}))
	p := migPod("p", "3g.20gb", 1)
	g0 := &c.Nodes[0].GPUs[0]
	if g0.FreeMilli != request.Whole {
		t.Fatalf("idle instance booked: FreeMilli %d", g0.FreeMilli)
	}
	existing := Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 4, UUID: "MIG-a"}}}
	created := Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 0, Create: true}}}
	for _, d := range []Decision{existing, created} {
		if err := c.Apply(&p, d); err != nil {
			t.Fatalf("apply %+v: %v", d, err)
		}
	}
	if g0.FreeMilli != request.Whole-2*(3*request.Whole/7) || len(g0.MIG.Instances) != 2 || !g0.MIG.Instances[1].InUse {
		t.Errorf("after apply: free %d, instances %+v", g0.FreeMilli, g0.MIG.Instances)
	}
	if free, ok := g0.MIG.FreeSlots(); !ok || len(free) != 0 {
		t.Errorf("FreeSlots after 3g@0 and 3g@4 = %v, %v", free, ok)
	}
	if free, ok := c.Nodes[0].GPUs[1].MIG.FreeSlots(); !ok || len(free) != 8 {
		t.Errorf("FreeSlots of an empty GPU = %v, %v", free, ok)
	}
	if err := c.Apply(&p, existing); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second apply of an instance in use: %v", err)
	}
	for _, d := range []Decision{created, existing} {
		if err := c.Release(&p, d); err != nil {
			t.Fatalf("release %+v: %v", d, err)
		}
	}
	if g0.FreeMilli != request.Whole || len(g0.MIG.Instances) != 1 || g0.MIG.Instances[0].InUse {
		t.Errorf("after release: free %d, instances %+v", g0.FreeMilli, g0.MIG.Instances)
	}
	if c.Nodes[0].FreeCPUMilli != c.Nodes[0].CPUMilli || len(c.Nodes[0].Shapes) != 0 {
		t.Errorf("host booking left: %d CPU free, shapes %v", c.Nodes[0].FreeCPUMilli, c.Nodes[0].Shapes)
	}

	static := cluster(t, migInv("s", "A100-40GB", 1, false))
	bad := []struct {
		name string
		c    *Cluster
		p    Pod
		d    Decision
		want string
	}{
		{"create on static", static, p, created, "not managed by Tessera"},
		{"bad start", c, p, Decision{Node: 0, GPUs: []int{1}, MIG: []MIGChoice{{Start: 2, Create: true}}}, "cannot start at memory slice 2"},
		{"overlap", c, p, Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 4, Create: true}}}, "overlaps"},
		{"no choices", c, p, Decision{Node: 0, GPUs: []int{0}}, "0 MIG instances"},
		{"unknown instance", c, p, Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 0}}}, "no 3g.20gb instance at start 0"},
		{"profile of another model", c, migPod("p", "1g.10gb+me", 1), Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 0, Create: true}}}, "has no MIG profile"},
		{"MIG choice for a share", c, Pod{Name: "s", GPU: request.GPU{Count: 1, ComputeMilli: 100, ComputeLimitMilli: 100}}, Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 0}}}, "without a MIG profile"},
		{"share on a MIG GPU", c, Pod{Name: "s", GPU: request.GPU{Count: 1, ComputeMilli: 100, ComputeLimitMilli: 100}}, Decision{Node: 0, GPUs: []int{0}}, "in MIG mode"},
	}
	for _, tc := range bad {
		before := tc.c.Clone()
		err := tc.c.Apply(&tc.p, tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if !reflect.DeepEqual(before.Nodes, tc.c.Nodes) {
			t.Errorf("%s: a refused decision changed the snapshot", tc.name)
		}
	}
	if err := c.Apply(&p, created); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(&p, existing); err == nil || !strings.Contains(err.Error(), "not in use") {
		t.Errorf("release of an idle instance: %v", err)
	}
}

func TestMIGFromInventory(t *testing.T) {
	bad := migInv("n", "A100-40GB", 1, true, []inventory.MIGInstance{inst("3g.20gb", 2, "MIG-a", false)})
	if _, err := FromInventory([]inventory.Node{bad}); err == nil || !strings.Contains(err.Error(), "cannot start at memory slice 2") {
		t.Errorf("invalid layout: %v", err)
	}
	// An instance whose start is unknown: usable as it is, nothing created.
	unknown := migInv("n", "A100-40GB", 1, true, []inventory.MIGInstance{{Profile: "3g.20gb", UUID: "MIG-a"}})
	c := cluster(t, unknown)
	p3 := migPod("p", "3g.20gb", 1)
	d, err := NewTessera(nil, 1).Place(c, &p3)
	if err != nil || d.MIG[0] != (MIGChoice{Start: -1, UUID: "MIG-a"}) {
		t.Errorf("unknown start, existing instance: %+v, %v", d, err)
	}
	if err := c.Apply(&p3, d); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTessera(nil, 1).Place(c, &p3); !errors.Is(err, ErrNoFit) {
		t.Errorf("created beside an instance of unknown start: %v", err)
	}
	// A model the catalog does not know: existing instances only.
	odd := migInv("n", "A100-40GB", 1, true, []inventory.MIGInstance{inst("2g.9gb", 0, "MIG-z", false)})
	odd.GPUs[0].Model = "Mystery"
	c = cluster(t, odd)
	p2 := migPod("p", "2g.9gb", 1)
	if d, err := NewTessera(nil, 1).Place(c, &p2); err != nil || d.MIG[0].UUID != "MIG-z" {
		t.Errorf("unknown model: %+v, %v", d, err)
	}
	if err := c.Apply(&p2, Decision{Node: 0, GPUs: []int{0}, MIG: []MIGChoice{{Start: 2, Create: true}}}); err == nil {
		t.Error("created an instance on a GPU without geometry")
	}
	// Clone copies MIG state.
	cl := c.Clone()
	cl.Nodes[0].GPUs[0].MIG.Instances[0].InUse = true
	if c.Nodes[0].GPUs[0].MIG.Instances[0].InUse {
		t.Error("Clone shares MIG instances")
	}
}

func TestShapeOfMIG(t *testing.T) {
	p := migPod("p", " 1G.10GB ", 1)
	s := ShapeOf(&p)
	if s.MIGProfile != "1g.10gb" || s.GPUMilli != 0 || s.GPUCount != 1 {
		t.Errorf("ShapeOf = %+v", s)
	}
	d := Distribution{{Shape: s, Weight: 0.25}, {Shape: Shape{GPUCount: 1, GPUMilli: 500}, Weight: 0.75}}
	other, mig := d.split()
	if len(other) != 1 || other[0].Weight != 1 || len(mig) != 1 || mig[0].Weight != 1 {
		t.Errorf("split = %v, %v", other, mig)
	}
}

// TestTypicalKeepsRareMIG: a few MIG requests among many shares survive
// the popularity cut, and the shares' weights are as without them.
func TestTypicalKeepsRareMIG(t *testing.T) {
	var with, without ShapeCounter
	for i := 0; i < 100; i++ {
		p := Pod{Name: "s", GPU: request.GPU{Count: 1, ComputeMilli: int64(100 + 100*(i%5)), ComputeLimitMilli: 1000}}
		with.Add(&p)
		without.Add(&p)
	}
	for _, prof := range []string{"1g.10gb", "1g.10gb", "4g.40gb"} {
		p := migPod("m", prof, 1)
		with.Add(&p)
	}
	d := with.Typical(0.95)
	other, mig := d.split()
	if len(mig) != 2 || mig[0].Shape.MIGProfile != "1g.10gb" || math.Abs(mig[0].Weight-2.0/3) > 1e-9 {
		t.Errorf("MIG part = %+v", mig)
	}
	want := without.Typical(0.95)
	if len(other) != len(want) {
		t.Fatalf("shares part = %+v, want %+v", other, want)
	}
	for i := range want {
		if other[i].Shape != want[i].Shape || math.Abs(other[i].Weight-want[i].Weight) > 1e-9 {
			t.Errorf("share %d = %+v, want %+v", i, other[i], want[i])
		}
	}
}

// TestMIGPlannerGuideOrder: the guide's 3-2-1-1 layout fails when the
// driver places 1g, 1g and 2g before the 3g. With 1g, 2g and 3g requests
// typical, the planner places them arriving in that order and the 3g
// still fits (at start 4); the capacity loss alone would put the 1g at 6
// and 4 and leave the 3g nowhere.
func TestMIGPlannerGuideOrder(t *testing.T) {
	d := migDist(map[string]float64{"1g.5gb": 0.5, "2g.10gb": 0.25, "3g.20gb": 0.25})
	c := cluster(t, migInv("n", "A100-40GB", 1, true))
	pol := NewTessera(d, 1)
	var got []MIGChoice
	for _, prof := range []string{"1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"} {
		p := migPod(prof, prof, 1)
		dec, err := pol.Place(c, &p)
		if err != nil {
			t.Fatalf("%s refused after %v: %v", prof, got, err)
		}
		if err := c.Apply(&p, dec); err != nil {
			t.Fatal(err)
		}
		got = append(got, dec.MIG[0])
	}
	if got[3].Start != 4 {
		t.Errorf("layout %v, want the 3g at 4", got)
	}
}

// TestMIGPlannerKeepsLargerProfilePlaceable: on one managed A100-40GB
// with a layout already in place, a request arrives. Where a larger
// profile of the typical mix has a start set that the request's lowest
// start overlaps (4g.20gb starts only at 0), first fit's choice leaves no
// room for it and the planner's does; where the request's profile is
// aligned inside the larger one's blocks (2g beside 2g under 3g, 1g
// beside 1g under 2g), first fit's lowest start already keeps it
// placeable, as the planner does.
func TestMIGPlannerKeepsLargerProfilePlaceable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		typical  map[string]float64
		layout   []inventory.MIGInstance
		request  string
		larger   string
		ffStart  int
		ffKeeps  bool
		planners []int // starts the planner may choose
	}{
		{"3g on an empty GPU, 4g typical", map[string]float64{"3g.20gb": 0.5, "4g.20gb": 0.5}, nil, "3g.20gb", "4g.20gb", 0, false, []int{4}},
		{"1g on an empty GPU, 4g typical", map[string]float64{"1g.5gb": 0.5, "4g.20gb": 0.5}, nil, "1g.5gb", "4g.20gb", 0, false, []int{4, 5, 6}},
		{"1g beside a 2g at 4, 4g typical", map[string]float64{"1g.5gb": 0.5, "4g.20gb": 0.5},
			[]inventory.MIGInstance{inst("2g.10gb", 4, "MIG-a", true)}, "1g.5gb", "4g.20gb", 0, false, []int{6}},
		{"2g beside a 2g at 0, 3g typical (aligned)", map[string]float64{"2g.10gb": 0.5, "3g.20gb": 0.5},
			[]inventory.MIGInstance{inst("2g.10gb", 0, "MIG-a", true)}, "2g.10gb", "3g.20gb", 2, true, []int{2}},
		{"1g beside a 1g at 0, 2g typical (aligned)", map[string]float64{"1g.5gb": 0.5, "2g.10gb": 0.5},
			[]inventory.MIGInstance{inst("1g.5gb", 0, "MIG-a", true)}, "1g.5gb", "2g.10gb", 1, true, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := migDist(tc.typical)
			p := migPod("p", tc.request, 1)
			placeable := func(pol Policy) (int, bool) {
				c := cluster(t, migInv("n", "A100-40GB", 1, true, tc.layout))
				dec, err := pol.Place(c, &p)
				if err != nil {
					t.Fatalf("%s: %v", pol.Name(), err)
				}
				if err := c.Apply(&p, dec); err != nil {
					t.Fatalf("%s: %v", pol.Name(), err)
				}
				return dec.MIG[0].Start, c.Nodes[0].GPUs[0].MIG.firstStart(tc.larger) >= 0
			}
			ff, err := New("tessera", Options{Typical: d, MIGFirstFit: true})
			if err != nil {
				t.Fatal(err)
			}
			if st, ok := placeable(ff); st != tc.ffStart || ok != tc.ffKeeps {
				t.Errorf("first fit: start %d, %s still placeable %v; want start %d, placeable %v", st, tc.larger, ok, tc.ffStart, tc.ffKeeps)
			}
			if st, ok := placeable(NewTessera(d, 1)); !ok || !slices.Contains(tc.planners, st) {
				t.Errorf("planner: start %d, %s still placeable %v; want a start in %v and placeable", st, tc.larger, ok, tc.planners)
			}
		})
	}
}

// TestMIGExpectedFill: the one-GPU model of what slot choice gains. With
// 3g and 4g requests alike on an A100-40GB, first fit puts a first 3g at
// start 0 and the GPU ends 3g + 3g (6 slices) half the time, 4g + 3g (7)
// otherwise: 6.5; the planner puts it at 4, and the next request, either,
// fills the GPU or ends 3g + 3g: 0.5 x 7 + 0.5 x (0.5 x 6 + 0.5 x 7) =
// 6.75. Where every profile's starts are aligned blocks that the lowest
// start keeps whole (1g, 2g and 7g), first fit loses nothing; nor does it
// with 1g and 4g: a 1g at start 0 shuts the 4g out, but the 1g requests
// that come fill the GPU all the same (the model counts what a GPU ends
// up holding, not which requests had to go elsewhere).
func TestMIGExpectedFill(t *testing.T) {
	m, _ := catalog.Default().Lookup("A100-40GB")
	for _, tc := range []struct {
		mix               map[string]float64
		firstFit, planner float64 // NaN: only planner >= first fit is checked
		equal             bool
	}{
		{map[string]float64{"3g.20gb": 0.5, "4g.20gb": 0.5}, 6.5, 6.75, false},
		{map[string]float64{"7g.40gb": 1}, 7, 7, true},
		{map[string]float64{"1g.5gb": 0.3, "2g.10gb": 0.3, "7g.40gb": 0.4}, math.NaN(), math.NaN(), true},
		{map[string]float64{"1g.5gb": 0.5, "4g.20gb": 0.5}, 7, 7, true},
	} {
		d := migDist(tc.mix)
		ff := MIGExpectedFill(d, "A100-40GB", m.MIG, true)
		pl := MIGExpectedFill(d, "A100-40GB", m.MIG, false)
		t.Logf("%v: first fit %.4f, planner %.4f slices per GPU", tc.mix, ff, pl)
		if !math.IsNaN(tc.firstFit) && (math.Abs(ff-tc.firstFit) > 1e-12 || math.Abs(pl-tc.planner) > 1e-12) {
			t.Errorf("%v: first fit %v, planner %v; want %v, %v", tc.mix, ff, pl, tc.firstFit, tc.planner)
		}
		switch {
		case tc.equal && math.Abs(ff-pl) > 1e-12:
			t.Errorf("%v: first fit %v, planner %v; want equal (aligned starts)", tc.mix, ff, pl)
		case !tc.equal && !(pl > ff):
			t.Errorf("%v: planner %v not above first fit %v", tc.mix, pl, ff)
		}
	}
	if got := MIGExpectedFill(migDist(map[string]float64{"3g.20gb": 1}), "A100-40GB", nil, false); got != 0 {
		t.Errorf("no geometry: %v, want 0", got)
	}
}
