package tracesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

func newVariant(t *testing.T, model, memory string) *MIGVariant {
	t.Helper()
	v, err := NewMIGVariant(catalog.Default(), model, memory)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gpuPod(count int, milli int64, models ...string) placement.Pod {
	return placement.Pod{Name: "p", CPUMilli: 4000, MemoryMiB: 8192, GPU: request.GPU{Count: count, ComputeMilli: milli, ComputeLimitMilli: milli, Models: models}}
}

// TestMIGProfileMapping: each GPU pod goes to the smallest profile with
// its compute share and, under the share rule, its share of memory (in
// memory slices).
func TestMIGProfileMapping(t *testing.T) {
	cases := []struct {
		model, memory string
		milli         int64
		want          string
	}{
		{"A100-40GB", MIGMemoryShare, 50, "1g.5gb"},
		{"A100-40GB", MIGMemoryShare, 125, "1g.5gb"},  // an eighth of the memory: one memory slice
		{"A100-40GB", MIGMemoryShare, 126, "1g.10gb"}, // one compute slice, two memory slices
		{"A100-40GB", MIGMemoryShare, 142, "1g.10gb"},
		{"A100-40GB", MIGMemoryShare, 143, "2g.10gb"}, // past a seventh of the compute
		{"A100-40GB", MIGMemoryShare, 250, "2g.10gb"},
		{"A100-40GB", MIGMemoryShare, 251, "3g.20gb"},
		{"A100-40GB", MIGMemoryShare, 428, "3g.20gb"},
		{"A100-40GB", MIGMemoryShare, 429, "4g.20gb"},
		{"A100-40GB", MIGMemoryShare, 500, "4g.20gb"},
		{"A100-40GB", MIGMemoryShare, 501, "7g.40gb"}, // more than half the memory
		{"A100-40GB", MIGMemoryShare, 810, "7g.40gb"},
		{"A100-40GB", MIGMemoryShare, 1000, "7g.40gb"},
		{"A100-40GB", MIGMemoryNone, 142, "1g.5gb"},
		{"A100-40GB", MIGMemoryNone, 285, "2g.10gb"},
		{"A100-40GB", MIGMemoryNone, 286, "3g.20gb"},
		{"A100-40GB", MIGMemoryNone, 571, "4g.20gb"},
		{"A100-40GB", MIGMemoryNone, 572, "7g.40gb"},
		{"H100-SXM", MIGMemoryShare, 110, "1g.10gb"},
		{"H100-SXM", MIGMemoryShare, 140, "1g.20gb"},
		{"H100-SXM", MIGMemoryShare, 470, "4g.40gb"},
		{"H100-SXM", MIGMemoryShare, 550, "7g.80gb"},
	}
	for _, tc := range cases {
		v := newVariant(t, tc.model, tc.memory)
		p := gpuPod(1, tc.milli)
		got, err := v.Profile(&p)
		if err != nil || got != tc.want {
			t.Errorf("%s %s %dm: %q, %v; want %s", tc.model, tc.memory, tc.milli, got, err, tc.want)
		}
	}
	// A pod that gives its GPU memory gets at least that memory, whatever
	// the assumption; a memory-only share asks its memory's share.
	withMemory := []struct {
		milli, memMiB int64
		want          string
	}{
		{100, 9000, "1g.10gb"},   // 1 compute slice, but more than 1g.5gb's memory
		{100, 12000, "3g.20gb"},  // more than the 10 GB profiles hold
		{300, 4000, "3g.20gb"},   // compute decides
		{0, 4000, "1g.5gb"},      // a memory-only share of 98m
		{0, 30000, "7g.40gb"},    // 733m: 7g, the only profile past 20 GB
		{1000, 30000, "7g.40gb"}, // a whole GPU
	}
	for _, memory := range []string{MIGMemoryShare, MIGMemoryNone} {
		v := newVariant(t, "A100-40GB", memory)
		for _, tc := range withMemory {
			p := gpuPod(1, tc.milli)
			p.GPU.MemoryMiB = tc.memMiB
			if got, err := v.Profile(&p); err != nil || got != tc.want {
				t.Errorf("%s: %dm with %d MiB: %q, %v; want %s", memory, tc.milli, tc.memMiB, got, err, tc.want)
			}
		}
	}
}

// TestMIGPod: a whole-GPU pod asks one full-GPU instance per GPU, a
// CPU-only pod is unchanged, allowed models are dropped, CPU and memory
// kept; under fractional the pod keeps its share.
func TestMIGPod(t *testing.T) {
	v := newVariant(t, "A100-40GB", MIGMemoryShare)
	cpuOnly := placement.Pod{Name: "c", CPUMilli: 2000, MemoryMiB: 100}
	cases := []struct {
		name, setup string
		in          placement.Pod
		want        placement.Pod
	}{
		{"whole", SetupPlanner, gpuPod(8, 1000, "V100M32"), placement.Pod{Name: "p", CPUMilli: 4000, MemoryMiB: 8192,
			GPU: request.GPU{Count: 8, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: "7g.40gb"}}},
		{"share", SetupTemplate, gpuPod(1, 470), placement.Pod{Name: "p", CPUMilli: 4000, MemoryMiB: 8192,
			GPU: request.GPU{Count: 1, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: "4g.20gb"}}},
		{"cpu only", SetupFirstFit, cpuOnly, cpuOnly},
		{"fractional", SetupFractional, gpuPod(1, 470, "T4"), gpuPod(1, 470)},
	}
	for _, tc := range cases {
		got, err := v.Pod(tc.setup, tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestNewMIGVariantRefuses(t *testing.T) {
	cases := []struct{ model, memory, want string }{
		{"Z9000", MIGMemoryShare, `model "Z9000" is not in the catalog`},
		{"T4", MIGMemoryShare, "does not support MIG"},
		{"A30", MIGMemoryShare, "has 4 compute and 4 memory slices"},
		{"A100-40GB", "half", "must be share or none"},
	}
	for _, tc := range cases {
		if _, err := NewMIGVariant(catalog.Default(), tc.model, tc.memory); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.model, tc.memory, err, tc.want)
		}
	}
}

// TestMIGLayoutsAndTemplates: mig-parted's all-1g and all-balanced and
// HAMi's template list, under each model's names, at valid starts.
func TestMIGLayoutsAndTemplates(t *testing.T) {
	pl := func(s ...string) []catalog.MIGPlacement {
		var out []catalog.MIGPlacement
		for _, x := range s {
			prof, start, _ := strings.Cut(x, "@")
			out = append(out, catalog.MIGPlacement{Profile: prof, Start: int(start[0] - '0')})
		}
		return out
	}
	cases := []struct {
		model  string
		all1g  []catalog.MIGPlacement
		bal    []catalog.MIGPlacement
		second []catalog.MIGPlacement // the second template
	}{
		{"A100-40GB", pl("1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3", "1g.5gb@4", "1g.5gb@5", "1g.5gb@6"),
			pl("1g.5gb@0", "1g.5gb@1", "2g.10gb@2", "3g.20gb@4"), pl("2g.10gb@0", "2g.10gb@2", "2g.10gb@4", "1g.5gb@6")},
		{"H100-SXM", pl("1g.10gb@0", "1g.10gb@1", "1g.10gb@2", "1g.10gb@3", "1g.10gb@4", "1g.10gb@5", "1g.10gb@6"),
			pl("1g.10gb@0", "1g.10gb@1", "2g.20gb@2", "3g.40gb@4"), pl("2g.20gb@0", "2g.20gb@2", "2g.20gb@4", "1g.10gb@6")},
	}
	for _, tc := range cases {
		v := newVariant(t, tc.model, MIGMemoryShare)
		all1g, err1 := v.Layout(SetupStaticAll1g)
		bal, err2 := v.Layout(SetupStaticBalanced)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(all1g, tc.all1g) || !reflect.DeepEqual(bal, tc.bal) {
			t.Errorf("%s: all-1g %v (%v), balanced %v (%v)", tc.model, all1g, err1, bal, err2)
		}
		if l, err := v.Layout(SetupPlanner); l != nil || err != nil {
			t.Errorf("%s: a dynamic setup has layout %v, %v", tc.model, l, err)
		}
		tpl := v.Templates()[v.Model()]
		if len(tpl) != 4 || !reflect.DeepEqual([]catalog.MIGPlacement(tpl[1]), tc.second) || len(tpl[0]) != 7 || len(tpl[2]) != 2 || len(tpl[3]) != 1 {
			t.Errorf("%s: templates %v", tc.model, tpl)
		}
		if _, err := placement.NewMIGTemplates(catalog.Default(), v.Templates()); err != nil {
			t.Errorf("%s: templates refused: %v", tc.model, err)
		}
	}
}

// TestMIGCluster: every setup keeps each node's name, CPU, memory and GPU
// count; fractional GPUs are plain, dynamic ones managed and empty, static
// ones hold their layout, the nodes with the most GPUs made all-7g until
// they hold the full-GPU requests' share of the demand.
func TestMIGCluster(t *testing.T) {
	nodes, pods := loadTiny(t)
	v := newVariant(t, "A100-40GB", MIGMemoryShare)
	for _, setup := range MIGSetups() {
		mapped, err := v.Pods(setup, pods)
		if err != nil {
			t.Fatal(err)
		}
		c, whole, err := v.Cluster(nodes, setup, mapped)
		if err != nil {
			t.Fatalf("%s: %v", setup, err)
		}
		layout, _ := v.Layout(setup)
		wholeSeen := 0
		for i := range c.Nodes {
			n, o := &c.Nodes[i], &nodes.Nodes[i]
			if n.Name != o.Name || n.CPUMilli != o.CPUMilli || n.MemoryMiB != o.MemoryMiB || len(n.GPUs) != len(o.GPUs) {
				t.Fatalf("%s: node %d is %s %d %d %d GPUs, was %s %d %d %d", setup, i, n.Name, n.CPUMilli, n.MemoryMiB, len(n.GPUs), o.Name, o.CPUMilli, o.MemoryMiB, len(o.GPUs))
			}
			for gi := range n.GPUs {
				g := &n.GPUs[gi]
				switch {
				case g.Model != "A100-40GB":
					t.Fatalf("%s: GPU model %s", setup, g.Model)
				case setup == SetupFractional && g.MIG != nil:
					t.Fatalf("%s: a GPU in MIG mode", setup)
				case setup == SetupFractional:
				case layout == nil && (!g.MIG.Managed || len(g.MIG.Instances) != 0):
					t.Fatalf("%s: GPU managed %v with %v", setup, g.MIG.Managed, g.MIG.Instances)
				case layout != nil && g.MIG.Managed:
					t.Fatalf("%s: a static GPU is managed", setup)
				case layout != nil && len(g.MIG.Instances) == 1 && g.MIG.Instances[0].Profile == "7g.40gb":
					wholeSeen++
				case layout != nil && !sameLayout(g.MIG.Instances, layout):
					t.Fatalf("%s: GPU holds %v, want %v", setup, g.MIG.Instances, layout)
				}
			}
		}
		if layout == nil {
			if whole != 0 {
				t.Errorf("%s: %d whole GPUs", setup, whole)
			}
			continue
		}
		// The tiny trace asks 7g for every whole-GPU pod and the 810m and
		// 650m pods: most of its demand, so the 8-GPU nodes go first.
		if whole != wholeSeen || whole < 24 || !allWhole(c, 0, 1, 2) {
			t.Errorf("%s: %d whole GPUs reported, %d seen; want at least the three 8-GPU nodes", setup, whole, wholeSeen)
		}
	}
}

func sameLayout(ins []placement.MIGInstance, l []catalog.MIGPlacement) bool {
	if len(ins) != len(l) {
		return false
	}
	for k := range ins {
		if ins[k].Profile != l[k].Profile || ins[k].Start != l[k].Start || ins[k].InUse {
			return false
		}
	}
	return true
}

func allWhole(c *placement.Cluster, nodes ...int) bool {
	for _, ni := range nodes {
		for _, g := range c.Nodes[ni].GPUs {
			if len(g.MIG.Instances) != 1 || g.MIG.Instances[0].Profile != "7g.40gb" {
				return false
			}
		}
	}
	return true
}

// instanceKey is an instance as a static layout fixes it.
type instanceKey struct {
	node, gpu, start int
	profile, uuid    string
}

// TestMIGSetupsBookExactly: in every setup, over a whole replay of the
// tiny trace, every pod is counted once, layouts stay valid, what the
// cluster holds is what the bookings say, each placed MIG pod holds Count
// instances that cover it, and static layouts never change.
func TestMIGSetupsBookExactly(t *testing.T) {
	nodes, pods := loadTiny(t)
	for _, model := range []string{"A100-40GB", "H100-SXM"} {
		v := newVariant(t, model, MIGMemoryShare)
		for _, setup := range MIGSetups() {
			cfg := Config{Trace: "tiny", Nodes: nodes, Pods: pods, Policy: setup, Seed: 42, Tune: 1.3, Popularity: 0.95, MIG: v}
			run, err := newRun(cfg)
			if err != nil {
				t.Fatalf("%s/%s: %v", model, setup, err)
			}
			before := instances(run.c)
			arrivals := Arrivals(pods, run.c.TotalGPUMilli(), cfg.Tune, cfg.Seed)
			var placed, failed, booked int
			var held float64
			for i := range arrivals {
				p := &arrivals[i]
				b, d, err := run.pl.place(run.c, p)
				if err != nil {
					if !errors.Is(err, placement.ErrNoFit) {
						t.Fatalf("%s/%s: %v", model, setup, err)
					}
					failed++
					continue
				}
				placed++
				held += b.compute
				if setup != SetupFractional && p.GPUCount() > 0 {
					booked += p.GPUCount()
					if len(d.MIG) != p.GPUCount() || b.compute < float64(p.TotalGPUMilli())-1e-9 {
						t.Fatalf("%s/%s: pod %s (%dm x %d) got %d instances holding %.1f", model, setup, p.Name, p.MilliPerGPU(), p.GPUCount(), len(d.MIG), b.compute)
					}
				}
			}
			if placed+failed != len(arrivals) {
				t.Fatalf("%s/%s: %d placed + %d failed != %d arrivals", model, setup, placed, failed, len(arrivals))
			}
			inUse, slices := 0, 0.0
			for ni := range run.c.Nodes {
				for gi := range run.c.Nodes[ni].GPUs {
					g := &run.c.Nodes[ni].GPUs[gi]
					if g.MIG == nil {
						continue
					}
					var l []catalog.MIGPlacement
					for _, in := range g.MIG.Instances {
						l = append(l, catalog.MIGPlacement{Profile: in.Profile, Start: in.Start})
						if in.InUse {
							inUse++
							q := g.MIG.Spec.ProfileIndex(in.Profile)
							slices += float64(g.MIG.Spec.Profiles[q].ComputeSlices) * request.Whole / float64(g.MIG.Spec.ComputeSlices)
						}
					}
					if err := g.MIG.Spec.CheckLayout(l); err != nil {
						t.Fatalf("%s/%s: node %d GPU %d: %v", model, setup, ni, gi, err)
					}
				}
			}
			switch {
			case setup == SetupFractional && held != float64(run.c.AllocatedGPUMilli()):
				t.Errorf("%s/%s: bookings hold %.0f, the cluster %d", model, setup, held, run.c.AllocatedGPUMilli())
			case setup != SetupFractional && (inUse != booked || math.Abs(slices-held) > 1e-6):
				t.Errorf("%s/%s: %d instances in use holding %.3f; bookings say %d holding %.3f", model, setup, inUse, slices, booked, held)
			}
			if setup == SetupStaticAll1g || setup == SetupStaticBalanced {
				if after := instances(run.c); !reflect.DeepEqual(before, after) {
					t.Errorf("%s/%s: the static layouts changed during the replay", model, setup)
				}
			}
		}
	}
}

func instances(c *placement.Cluster) []instanceKey {
	var out []instanceKey
	for ni := range c.Nodes {
		for gi := range c.Nodes[ni].GPUs {
			if m := c.Nodes[ni].GPUs[gi].MIG; m != nil {
				for _, in := range m.Instances {
					out = append(out, instanceKey{ni, gi, in.Start, in.Profile, in.UUID})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b instanceKey) int {
		if a.node != b.node {
			return a.node - b.node
		}
		if a.gpu != b.gpu {
			return a.gpu - b.gpu
		}
		return a.start - b.start
	})
	return out
}

// TestMIGReplaySetups: every setup of one seed sees the same arrivals;
// a MIG setup's pods hold at least what they ask; fractional replays
// exactly as Tessera's default policy on the renamed cluster.
func TestMIGReplaySetups(t *testing.T) {
	nodes, pods := loadTiny(t)
	v := newVariant(t, "A100-40GB", MIGMemoryShare)
	m := Matrix{Nodes: nodes, Traces: []Trace{{Name: "tiny", Pods: pods}}, Policies: MIGSetups(), Seeds: []uint64{42, 43}, Tune: 1.3, Popularity: 0.95, Parallel: 2, MIG: v}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bySeed := map[uint64]*Result{}
	for _, r := range res {
		if r.MIG == nil || r.MIG.Model != "A100-40GB" {
			t.Fatalf("%s: MIG result %+v", r.Policy, r.MIG)
		}
		first := bySeed[r.Seed]
		if first == nil {
			bySeed[r.Seed] = r
		} else if r.Pods != first.Pods || r.ArrivedGPUMilli != first.ArrivedGPUMilli {
			t.Errorf("seed %d: %s saw %d pods asking %d, %s %d asking %d", r.Seed, r.Policy, r.Pods, r.ArrivedGPUMilli, first.Policy, first.Pods, first.ArrivedGPUMilli)
		}
		if r.AllocatedPctEnd < r.MIG.AskedPctEnd-1e-9 || (r.Policy == SetupFractional && r.AllocatedPctEnd != r.MIG.AskedPctEnd) {
			t.Errorf("%s seed %d: holds %.2f%%, asks %.2f%%", r.Policy, r.Seed, r.AllocatedPctEnd, r.MIG.AskedPctEnd)
		}
		if (r.Policy == SetupStaticAll1g || r.Policy == SetupStaticBalanced) != (r.MIG.WholeGPUs > 0) {
			t.Errorf("%s: %d whole GPUs", r.Policy, r.MIG.WholeGPUs)
		}
	}
	// Fractional is the plain replay of Tessera's default policy on the
	// same nodes made A100-40GB, the pods without their allowed models.
	renamed, _, err := v.Cluster(nodes, SetupFractional, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := v.Pods(SetupFractional, pods)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Replay(context.Background(), Config{Trace: "tiny", Nodes: renamed, Pods: plain, Policy: "tessera", Seed: 42, Tune: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Policy == SetupFractional && r.Seed == 42 && (r.AllocatedPctEnd != want.AllocatedPctEnd || r.FailedPods != want.FailedPods) {
			t.Errorf("fractional: %.4f%% allocated, %d failed; the plain replay %.4f%%, %d", r.AllocatedPctEnd, r.FailedPods, want.AllocatedPctEnd, want.FailedPods)
		}
	}

	rows := MIGTable(res, MIGSetups())
	var setups []string
	for _, r := range rows {
		setups = append(setups, r.Setup)
		if r.Seeds != 2 {
			t.Errorf("%s: %d seeds", r.Setup, r.Seeds)
		}
	}
	if !reflect.DeepEqual(setups, MIGSetups()) {
		t.Errorf("rows %v, want %v", setups, MIGSetups())
	}
	var tbl bytes.Buffer
	if err := WriteMIGTable(&tbl, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "| tiny | A100-40GB | share | fractional | 2 |") || !strings.Contains(tbl.String(), "| +0.00 |") {
		t.Errorf("table:\n%s", tbl.String())
	}
	if err := WriteMIGPlot(filepath.Join(t.TempDir(), "mig.svg"), rows); err != nil {
		t.Error(err)
	}
	var js bytes.Buffer
	if err := WriteSummaryJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var sums []RunSummary
	if err := json.Unmarshal(js.Bytes(), &sums); err != nil || len(sums) != len(res) || sums[0].MIG == nil || sums[0].MIG.Model != "A100-40GB" {
		t.Errorf("summary.json: %v, %+v", err, sums)
	}
}

func TestMIGReplayRefuses(t *testing.T) {
	nodes, pods := loadTiny(t)
	v := newVariant(t, "A100-40GB", MIGMemoryShare)
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Nodes: nodes, Pods: pods, Policy: "fgd", Tune: 1.3, MIG: v}, `MIG setup "fgd"`},
		{Config{Nodes: nodes, Pods: pods, Policy: SetupPlanner, Tune: 1.3, MIG: v, Breakdown: true}, "breakdown is not defined"},
	}
	for _, tc := range cases {
		if _, err := Replay(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.cfg.Policy, err, tc.want)
		}
	}
}

// TestOpenbMIGVariant reads the shared openb traces: on the default trace
// (seed 42) the fractional setup replays exactly as Tessera's default
// policy on the openb cluster (the trace has no gpu_spec, and renaming
// every GPU changes nothing else), and every MIG setup sees the same
// arrivals and holds at least what its pods ask.
func TestOpenbMIGVariant(t *testing.T) {
	nodes, pods, _ := openbDefault(t)
	plain, err := Replay(context.Background(), Config{Trace: "default", Nodes: nodes, Pods: pods, Policy: "tessera", Seed: 42, Tune: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	m := Matrix{Nodes: nodes, Traces: []Trace{{Name: "default", Pods: pods}}, Policies: MIGSetups(), Seeds: []uint64{42}, Tune: 1.3, Parallel: 2,
		MIG: newVariant(t, "A100-40GB", MIGMemoryShare)}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%s: held %.2f%%, asked %.2f%%, failed %.2f%% of the demand", r.Policy, r.AllocatedPctEnd, r.MIG.AskedPctEnd, r.FailedGPUPct())
		if r.Pods != plain.Pods || r.ArrivedGPUMilli != plain.ArrivedGPUMilli {
			t.Errorf("%s: %d arrivals asking %d, openb %d asking %d", r.Policy, r.Pods, r.ArrivedGPUMilli, plain.Pods, plain.ArrivedGPUMilli)
		}
		if r.AllocatedPctEnd < r.MIG.AskedPctEnd-1e-9 {
			t.Errorf("%s: holds %.2f%% but asks %.2f%%", r.Policy, r.AllocatedPctEnd, r.MIG.AskedPctEnd)
		}
		if r.Policy == SetupFractional && (r.AllocatedPctEnd != plain.AllocatedPctEnd || r.FailedPods != plain.FailedPods || !reflect.DeepEqual(r.Curve, plain.Curve)) {
			t.Errorf("fractional: %.4f%%, %d failed; openb's replay %.4f%%, %d", r.AllocatedPctEnd, r.FailedPods, plain.AllocatedPctEnd, plain.FailedPods)
		}
	}
}
