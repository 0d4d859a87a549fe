package tracesim

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

func a100Variant(t *testing.T) *MIGVariant {
	t.Helper()
	v, err := NewMIGVariant(catalog.Default(), "A100-40GB", MIGMemoryShare)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestReplayDynamicMIGKnownTimeline: on one A100-40GB, a 300m pod (3g)
// arrives at 0 and runs 100 s, a 470m pod (4g, start 0 only) at 10, and a
// CPU-only pod at 50 ends the window. First fit puts the 3g at start 0,
// so the 4g waits until the 3g leaves; the planner, with 3g and 4g the
// typical requests, puts the 3g at start 4 and the 4g starts at once.
// Held, asked, memory, waiting, the free capacity requests cannot use and
// the tries that fit nowhere (first fit's 4g at 10, for want of a start)
// follow by hand.
func TestReplayDynamicMIGKnownTimeline(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 16000, 65536, 1, "A100-40GB", 40960)}}
	pods := []TimedPod{
		timed("three", 1, 300, 0, 100),
		timed("four", 1, 470, 10, 100),
		{Pod: placement.Pod{Name: "cpu", CPUMilli: 1000}, Arrive: 50, Duration: 1},
	}
	const seventh = 100.0 / 7 // one compute slice, % of the GPU
	for _, tc := range []struct {
		setup                                    string
		held, asked, memory, waiting, frag, none float64
		delayMean                                float64
		misfits                                  int // all without GPU room
	}{
		// [0,50]: the 3g alone at 0 (frag: 4 free slices, the largest
		// instance a 3g at 4); the 4g waits [10,50].
		{SetupFirstFit, 3 * seventh, 30, 50, 0.8, seventh, 4 * seventh, 30, 1},
		// [0,10]: the 3g at 4 (the 4g at 0 still fits: no frag);
		// [10,50]: both, the GPU full.
		{SetupPlanner, (3*seventh*10 + 100*40) / 50, (30*10 + 77*40) / 50.0, (50*10 + 100*40) / 50.0, 0, 0, 4 * seventh * 10 / 50, 0, 0},
	} {
		t.Run(tc.setup, func(t *testing.T) {
			r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: tc.setup, Seed: 1,
				Tune: 0.77, Compression: 1, Period: 10, MIG: a100Variant(t)})
			if err != nil {
				t.Fatal(err)
			}
			m := r.MIG
			if m == nil {
				t.Fatal("no MIG result")
			}
			if r.Policy != tc.setup || r.Pods != 3 || r.Started != 3 || r.Window != 50 {
				t.Fatalf("policy %s, pods %d, started %d, window %v; want %s, 3, 3, 50", r.Policy, r.Pods, r.Started, r.Window, tc.setup)
			}
			if m.Misfits != tc.misfits || m.NoGPURoom != tc.misfits {
				t.Errorf("misfits %d, without GPU room %d; want %d, %d", m.Misfits, m.NoGPURoom, tc.misfits, tc.misfits)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"held %", m.HeldPct, tc.held}, {"allocated %", r.AllocatedPct, tc.held}, {"asked %", m.AskedPct, tc.asked},
				{"memory %", m.MemoryPct, tc.memory}, {"waiting", m.WaitingMean, tc.waiting}, {"waiting whole", m.WaitingWholeMean, 0},
				{"frag %", m.FragPct, tc.frag}, {"not whole %", m.NotWholePct, tc.none}, {"delay mean", r.DelayMean, tc.delayMean},
				{"never started GPU %", m.NeverStartedGPUPct, 0},
			} {
				if math.Abs(c.got-c.want) > 1e-9 {
					t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestReplayDynamicMIGSetups: every setup replays the tiny trace with
// departures; every pod is accounted for, a MIG instance holds at least
// what its pod asks (fractional holds exactly that), the free capacity no
// whole-GPU request can use includes what no request can use, and every
// instance created is gone once its pod ends (nothing held at the end).
func TestReplayDynamicMIGSetups(t *testing.T) {
	nodes, err := LoadNodes("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadTimedPods("testdata/timed_pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	v := a100Variant(t)
	for _, setup := range MIGSetups() {
		cfg := DynamicConfig{Trace: "tiny", Nodes: nodes, Pods: pods, Policy: setup, Seed: 42, Tune: 1.5, Load: 1.2, Period: 10, MIG: v}
		r, err := ReplayDynamic(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", setup, err)
		}
		m := r.MIG
		if r.Started+r.NeverStarted != r.Pods || r.Pods == 0 {
			t.Errorf("%s: started %d + never %d != pods %d", setup, r.Started, r.NeverStarted, r.Pods)
		}
		if setup == SetupFractional && math.Abs(m.HeldPct-m.AskedPct) > 1e-9 {
			t.Errorf("fractional: held %v != asked %v", m.HeldPct, m.AskedPct)
		}
		if m.HeldPct < m.AskedPct-1e-9 {
			t.Errorf("%s: held %v below asked %v", setup, m.HeldPct, m.AskedPct)
		}
		if m.FragPct < -1e-9 || m.NotWholePct < m.FragPct-1e-9 || m.HeldPct+m.NotWholePct > 100+1e-9 {
			t.Errorf("%s: frag %v, not whole %v, held %v: want 0 <= frag <= not whole <= 100 - held", setup, m.FragPct, m.NotWholePct, m.HeldPct)
		}
		if setup == SetupFirstFit || setup == SetupPlanner || setup == SetupTemplate {
			if r.NeverStarted != 0 {
				t.Errorf("%s: %d pods never started on managed GPUs (every profile fits an empty GPU)", setup, r.NeverStarted)
			}
		}
		// The end state: replay again, step by step, and look at the cluster.
		d, c := replayForState(t, cfg)
		if d.mig.held > 1e-6 || d.mig.asked > 1e-6 || d.mig.mem > 1e-6 {
			t.Errorf("%s: at the end held %v, asked %v, memory %v; want 0 (every pod ended)", setup, d.mig.held, d.mig.asked, d.mig.mem)
		}
		for ni := range c.Nodes {
			for _, g := range c.Nodes[ni].GPUs {
				if g.MIG == nil {
					continue
				}
				for _, in := range g.MIG.Instances {
					if in.InUse || (g.MIG.Managed && in.UUID == "") {
						t.Errorf("%s: node %s GPU %d keeps %+v after every pod ended", setup, c.Nodes[ni].Name, g.Index, in)
					}
				}
			}
		}
	}
}

// replayForState runs cfg's MIG replay and returns its state and cluster
// at the end (every pod that started has ended: the replay runs on until
// nothing runs).
func replayForState(t *testing.T, cfg DynamicConfig) (*dynReplay, *placement.Cluster) {
	t.Helper()
	mig, c, err := newDynMIG(cfg)
	if err != nil {
		t.Fatal(err)
	}
	arrivals := TimedArrivals(cfg.Pods, c.TotalGPUMilli(), cfg.Tune, cfg.Seed)
	k, err := compression(arrivals, c.TotalGPUMilli(), cfg.Load)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDynReplay(cfg, c, mig.pl.pol, mig, arrivals, k)
	if err != nil {
		t.Fatal(err)
	}
	res := &DynamicResult{}
	if err := d.replay(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	for len(d.running) > 0 { // let what still runs end
		i := d.running[0]
		d.running = d.running[1:]
		if err := d.release(i); err != nil {
			t.Fatal(err)
		}
	}
	return d, c
}

// TestReplayDynamicMIGRefuses: what the MIG dynamic replay does not model
// is refused, naming it.
func TestReplayDynamicMIGRefuses(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 16000, 65536, 1, "A100-40GB", 40960)}}
	pods := []TimedPod{timed("a", 1, 300, 0, 10), timed("b", 1, 300, 10, 10)}
	base := DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: SetupFirstFit, Seed: 1, Tune: 0.6, Compression: 1, Period: 10, MIG: a100Variant(t)}
	for _, tc := range []struct {
		change func(*DynamicConfig)
		want   string
	}{
		{func(c *DynamicConfig) { c.Queues = &QueueConfig{} }, "queues are not modelled with MIG"},
		{func(c *DynamicConfig) { c.Preemption = true }, "preemption is not modelled with MIG"},
		{func(c *DynamicConfig) { c.Gangs = true }, "gangs are not modelled with MIG"},
		{func(c *DynamicConfig) { c.Policy = "bestfit" }, `MIG setup "bestfit": want one of fractional,`},
	} {
		cfg := base
		tc.change(&cfg)
		if _, err := ReplayDynamic(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}

// TestSlotFree: a GPU's free compute, the largest instance it can still
// give and whether it can give a whole GPU, on layouts by hand.
func TestSlotFree(t *testing.T) {
	model, ok := catalog.Default().Lookup("A100-40GB")
	if !ok {
		t.Fatal("A100-40GB not in the catalog")
	}
	spec := model.MIG
	slice := float64(request.Whole) / 7
	for _, tc := range []struct {
		name          string
		managed       bool
		instances     []inventory.MIGInstance
		free, largest float64
		whole         bool
	}{
		{"empty managed", true, nil, 7 * slice, 7 * slice, true},
		{"3g at 0 in use", true, []inventory.MIGInstance{migInst("3g.20gb", 0, true)}, 4 * slice, 3 * slice, false},
		{"3g at 4 in use", true, []inventory.MIGInstance{migInst("3g.20gb", 4, true)}, 4 * slice, 4 * slice, false},
		{"1g at 0 in use", true, []inventory.MIGInstance{migInst("1g.5gb", 0, true)}, 6 * slice, 3 * slice, false},
		{"static 7 x 1g, two in use", false, []inventory.MIGInstance{migInst("1g.5gb", 0, true), migInst("1g.5gb", 1, true),
			migInst("1g.5gb", 2, false), migInst("1g.5gb", 3, false), migInst("1g.5gb", 4, false), migInst("1g.5gb", 5, false), migInst("1g.5gb", 6, false)}, 5 * slice, slice, false},
		{"static 7g free", false, []inventory.MIGInstance{migInst("7g.40gb", 0, false)}, 7 * slice, 7 * slice, true},
		{"static 7g in use", false, []inventory.MIGInstance{migInst("7g.40gb", 0, true)}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &placement.GPU{MIG: &placement.MIGGPU{Model: "A100-40GB", Spec: spec, Managed: tc.managed}}
			for _, in := range tc.instances {
				g.MIG.Instances = append(g.MIG.Instances, placement.MIGInstance{Profile: in.Profile, Start: *in.Start, UUID: in.UUID, InUse: in.InUse})
			}
			free, largest, whole := slotFree(g)
			if math.Abs(free-tc.free) > 1e-9 || math.Abs(largest-tc.largest) > 1e-9 || whole != tc.whole {
				t.Errorf("free %v, largest %v, whole %v; want %v, %v, %v", free, largest, whole, tc.free, tc.largest, tc.whole)
			}
		})
	}
	g := &placement.GPU{FreeMilli: 400}
	if free, largest, whole := slotFree(g); free != 400 || largest != 400 || whole {
		t.Errorf("a GPU not in MIG mode with 400m free: %v, %v, %v; want 400, 400, false", free, largest, whole)
	}
}

func migInst(profile string, start int, inUse bool) inventory.MIGInstance {
	return inventory.MIGInstance{Profile: profile, Start: inventory.Slot(start), UUID: "MIG-" + profile, InUse: inUse}
}

// TestOpenbMIGSlotModel computes the one-GPU model of what slot choice can
// gain (placement.MIGExpectedFill) on the MIG requests of the openb
// default and gpushare100 traces mapped to A100-40GB profiles, all of
// them and the sharing ones alone (without 7g): the planner's starts never
// expect less than first fit's, and the numbers are those
// docs/simulator.md ("MIG with departures") cites.
func TestOpenbMIGSlotModel(t *testing.T) {
	dir := openbDir(t)
	v := a100Variant(t)
	model, _ := catalog.Default().Lookup("A100-40GB")
	for _, trace := range []string{"default", "gpushare100"} {
		pods, err := LoadPods(filepath.Join(dir, "openb_pod_list_"+trace+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		mapped, err := v.Pods(SetupPlanner, pods)
		if err != nil {
			t.Fatal(err)
		}
		var sharing []placement.Pod
		for _, p := range mapped {
			if p.MIG() && !strings.EqualFold(p.GPU.MIGProfile, "7g.40gb") {
				sharing = append(sharing, p)
			}
		}
		for _, mix := range []struct {
			name string
			pods []placement.Pod
		}{{"all", mapped}, {"sharing", sharing}} {
			d := placement.TypicalShapes(mix.pods, 0.95)
			ff := placement.MIGExpectedFill(d, model.Name, model.MIG, true)
			pl := placement.MIGExpectedFill(d, model.Name, model.MIG, false)
			t.Logf("%s, %s MIG requests: expected slices per GPU: first fit %.4f, planner %.4f (%+.4f)", trace, mix.name, ff, pl, pl-ff)
			if pl < ff-1e-12 {
				t.Errorf("%s, %s: planner %v below first fit %v", trace, mix.name, pl, ff)
			}
		}
	}
}

// TestGPURoom: a 3g request has GPU room on a managed GPU with start 4
// free, whatever the node's CPU; none where only a 4g-blocking layout is
// left, nor on a static GPU without a free 3g instance.
func TestGPURoom(t *testing.T) {
	v := a100Variant(t)
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 1000, 65536, 1, "A100-40GB", 40960)}}
	c, _, err := v.Cluster(nodes, SetupFirstFit, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := placement.Pod{Name: "big", CPUMilli: 64000, GPU: request.GPU{Count: 1, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: "3g.20gb"}}
	if !gpuRoom(c, &big) {
		t.Error("empty managed GPU: no room for a 3g (CPU must not count)")
	}
	four := big
	four.CPUMilli, four.GPU.MIGProfile = 100, "4g.20gb"
	big.CPUMilli = 100
	d, err := placement.NewFirstFit().Place(c, &big)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(&big, d); err != nil { // first fit: 3g at start 0
		t.Fatal(err)
	}
	if gpuRoom(c, &four) {
		t.Error("3g at 0: room for a 4g (start 0 only)")
	}
	if !gpuRoom(c, &big) {
		t.Error("3g at 0: no room for a second 3g at 4")
	}
	static, _, err := v.Cluster(nodes, SetupStaticAll1g, []placement.Pod{big})
	if err != nil {
		t.Fatal(err)
	}
	if gpuRoom(static, &big) {
		t.Error("static all-1g: room for a 3g")
	}
}

// TestOpenbDynamicMIGFractionalIsPlain: on the openb default trace (seed
// 42) the MIG variant's fractional setup, placed by the MIG replay's own
// cycle loop, replays exactly as the plain dynamic replay of Tessera's
// default policy through package cycle (the trace has no gpu_spec, and
// one default queue serves both): the loop changes no decision.
func TestOpenbDynamicMIGFractionalIsPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: replays the openb traces (seconds); skipped with -short")
	}
	dir := openbDir(t)
	nodes, err := LoadNodes(filepath.Join(dir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadTimedPods(filepath.Join(dir, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DynamicConfig{Trace: "default", Nodes: nodes, Pods: pods, Policy: "tessera", Seed: 42, Tune: 1.5, Load: 1.2, Period: 10}
	plain, err := ReplayDynamic(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policy, cfg.MIG = SetupFractional, a100Variant(t)
	mig, err := ReplayDynamic(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plain %.4f%%, delay %.2f s; fractional %.4f%%, delay %.2f s", plain.AllocatedPct, plain.DelayMean, mig.AllocatedPct, mig.DelayMean)
	if plain.AllocatedPct != mig.AllocatedPct || plain.Delays != mig.Delays || plain.Started != mig.Started || plain.Window != mig.Window || len(plain.Series) != len(mig.Series) {
		t.Errorf("plain: %.6f%%, %+v, %d started, %d samples; MIG fractional: %.6f%%, %+v, %d started, %d samples",
			plain.AllocatedPct, plain.Delays, plain.Started, len(plain.Series), mig.AllocatedPct, mig.Delays, mig.Started, len(mig.Series))
	}
}

// TestDynamicMIGTableAndPlot: the MIG table gives mean ± standard
// deviation over seeds, one row per setup in the order asked, and the
// plot of a few runs is written as PNG when the path says so.
func TestDynamicMIGTableAndPlot(t *testing.T) {
	mk := func(setup string, seed uint64, held float64) *DynamicResult {
		return &DynamicResult{Trace: "t", Policy: setup, Seed: seed, Window: 20, MIG: &DynamicMIG{Model: "A100-40GB", Memory: MIGMemoryShare, HeldPct: held, AskedPct: held / 2},
			Series: []Sample{{Time: 0, AllocatedPct: held}, {Time: 10, AllocatedPct: held, Waiting: 1}}}
	}
	rs := []*DynamicResult{mk(SetupPlanner, 1, 40), mk(SetupFirstFit, 1, 30), mk(SetupPlanner, 2, 44), mk(SetupFirstFit, 2, 30), {Trace: "t", Policy: "bestfit"}}
	table := DynamicMIGTable(rs, MIGSetups())
	ff := strings.Index(table, "| t | A100-40GB | share | first-fit | 2 | 30.00 ± 0.00 | 15.00 ± 0.00 |")
	pl := strings.Index(table, "| t | A100-40GB | share | tessera | 2 | 42.00 ± 2.83 | 21.00 ± 1.41 |")
	if ff < 0 || pl < 0 || pl < ff || strings.Contains(table, "bestfit") {
		t.Errorf("table (first fit before the planner, sd over two seeds, no plain run):\n%s", table)
	}
	path := filepath.Join(t.TempDir(), "mig.png")
	if err := WriteDynamicPlot(path, "t", rs[:2]); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("not a PNG (%v)", err)
	}
	if err := WriteDynamicPlot(path, "t", nil); err == nil {
		t.Error("no runs: no error")
	}
}
