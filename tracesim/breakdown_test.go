package tracesim

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

func sharePod(name string, milli, cpu int64) placement.Pod {
	return placement.Pod{Name: name, CPUMilli: cpu, GPU: request.GPU{Count: 1, ComputeMilli: milli, ComputeLimitMilli: milli}}
}

// TestBreakdownByHand books pods by hand on a two-node cluster and checks
// every number of the breakdown against what was booked.
func TestBreakdownByHand(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{
		{Name: "a", CPUMilli: 96000, FreeCPUMilli: 96000, GPUs: []placement.GPU{{Model: "G2", FreeMilli: 1000}, {Index: 1, Model: "G2", FreeMilli: 1000}, {Index: 2, Model: "G2", FreeMilli: 1000}}},
		{Name: "b", CPUMilli: 104000, FreeCPUMilli: 104000, GPUs: []placement.GPU{{Model: "T4", FreeMilli: 1000}}},
	}}
	rec := newRecorder(c)
	whole := placement.Pod{Name: "w", CPUMilli: 8000, GPU: request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000}}
	steps := []struct {
		p   placement.Pod
		d   placement.Decision
		fit bool
	}{
		{sharePod("s810", 810, 3000), placement.Decision{Node: 0, GPUs: []int{0}}, true},
		{sharePod("s470a", 470, 12000), placement.Decision{Node: 0, GPUs: []int{1}}, true},
		{sharePod("s470b", 470, 12000), placement.Decision{Node: 0, GPUs: []int{1}}, true},
		{placement.Pod{Name: "cpu", CPUMilli: 32000}, placement.Decision{Node: 1}, true},
		{whole, placement.Decision{Node: 1, GPUs: []int{0}}, true},
		{sharePod("late810", 810, 3000), placement.Decision{}, false},
		{placement.Pod{Name: "cpu2", CPUMilli: 200000}, placement.Decision{}, false},
	}
	var arrived int64
	for i, s := range steps {
		if s.fit {
			if err := c.Apply(&s.p, s.d); err != nil {
				t.Fatal(err)
			}
		}
		rec.arrived(i, &s.p, s.d, s.fit, arrived, 4000)
		arrived += s.p.TotalGPUMilli()
	}
	b := rec.finish(c, 4000)
	if b.FirstFailure != 5 || b.FirstFailurePct != 100*float64(810+940+1000)/4000 {
		t.Errorf("first failure = %d at %.2f%%, want 5 at %.2f%%", b.FirstFailure, b.FirstFailurePct, 100*float64(810+940+1000)/4000)
	}
	wantHoldings := []Holding{{"free", 1, 25}, {"810", 1, 4.75}, {"470+470", 1, 1.5}}
	if !reflect.DeepEqual(b.Holdings, wantHoldings) {
		t.Errorf("holdings = %+v, want %+v", b.Holdings, wantHoldings)
	}
	wantTypes := []NodeTypeUse{
		{Type: "G2 3 GPUs 96 CPUs", Nodes: 1, GPUs: 3, UnallocatedPct: 31.25, FreeCPUPct: 100 * 69.0 / 96},
		{Type: "T4 1 GPUs 104 CPUs", Nodes: 1, GPUs: 1, UnallocatedPct: 0, FreeCPUPct: 100 * 64.0 / 104, CPUOnlyPct: 100 * 32.0 / 104},
	}
	if !reflect.DeepEqual(b.NodeTypes, wantTypes) {
		t.Errorf("node types = %+v, want %+v", b.NodeTypes, wantTypes)
	}
	wantShares := []ShareCount{{810, 2, 1}, {470, 2, 2}}
	if !reflect.DeepEqual(b.Shares, wantShares) {
		t.Errorf("shares = %+v, want %+v", b.Shares, wantShares)
	}
}

// TestReplayBreakdownAddsUp replays the tiny trace and checks that the
// breakdown accounts for exactly the capacity the replay left free, and
// that asking for it changes no decision.
func TestReplayBreakdownAddsUp(t *testing.T) {
	c, pods := loadTiny(t)
	for _, pol := range []string{"fgd", "tessera"} {
		cfg := Config{Trace: "tiny", Nodes: c, Pods: pods, Policy: pol, Seed: 7, Tune: 1.3}
		plain, err := Replay(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if plain.Breakdown != nil {
			t.Fatalf("%s: breakdown recorded without being asked for", pol)
		}
		cfg.Breakdown = true
		r, err := Replay(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Breakdown
		if b == nil {
			t.Fatalf("%s: no breakdown", pol)
		}
		if r.AllocatedPctEnd != plain.AllocatedPctEnd || r.FailedPods != plain.FailedPods {
			t.Fatalf("%s: breakdown changed the replay: %.3f%%/%d vs %.3f%%/%d", pol, r.AllocatedPctEnd, r.FailedPods, plain.AllocatedPctEnd, plain.FailedPods)
		}
		var holdings, types float64
		for _, h := range b.Holdings {
			holdings += h.UnallocatedPct
		}
		for _, nt := range b.NodeTypes {
			types += nt.UnallocatedPct
		}
		free := 100 - r.AllocatedPctEnd
		if math.Abs(holdings-free) > 1e-9 || math.Abs(types-free) > 1e-9 {
			t.Fatalf("%s: holdings %.6f%%, node types %.6f%%, replay left %.6f%% free", pol, holdings, types, free)
		}
		var placed int
		for _, s := range b.Shares {
			if s.Placed > s.Arrived {
				t.Fatalf("%s: %dm: placed %d of %d arrived", pol, s.Milli, s.Placed, s.Arrived)
			}
			placed += s.Placed
		}
		if placed == 0 || b.FirstFailure < 0 || b.FirstFailure >= r.Pods {
			t.Fatalf("%s: %d sharing pods placed, first failure %d of %d", pol, placed, b.FirstFailure, r.Pods)
		}
	}
}

func TestWriteBreakdown(t *testing.T) {
	c, pods := loadTiny(t)
	m := Matrix{Nodes: c, Traces: []Trace{{Name: "tiny", Pods: pods}}, Policies: []string{"tessera", "fgd"}, Seeds: []uint64{1, 2}, Tune: 1.3, Parallel: 2, Breakdown: true}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := WriteBreakdown(&sb, res, m.Policies); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	ti, fi := strings.Index(out, "## tiny / tessera (2 seeds)"), strings.Index(out, "## tiny / fgd (2 seeds)")
	if ti < 0 || fi < ti {
		t.Fatalf("want a tessera then an fgd section:\n%s", out)
	}
	for _, want := range []string{"| GPU holds (sharing pods, milli) |", "| node type |", "| sharing pod (milli) |", "First GPU pod dropped at"} {
		if !strings.Contains(out, want) {
			t.Fatalf("breakdown lacks %q:\n%s", want, out)
		}
	}
	sb.Reset()
	for _, r := range res {
		r.Breakdown = nil
	}
	if err := WriteBreakdown(&sb, res, m.Policies); err != nil || sb.Len() != 0 {
		t.Fatalf("results without breakdowns wrote %q (%v)", sb.String(), err)
	}
}
