package webui

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/tessera-gpu/tessera/gpuuse"
)

// TestQueueUse: Summarize sums each share's use into its queue and the
// queue's parents (as their booked use), measured and simulated apart;
// a share not metered adds nothing, and a queue none of whose shares
// carries a figure has none.
func TestQueueUse(t *testing.T) {
	busy := func(src gpuuse.Source, v int64) *gpuuse.Use { return &gpuuse.Use{Source: src, BusyMilli: &v} }
	none := gpuuse.NotMetered("the container holds no seat with the node arbiter")
	s := Snapshot{
		Queues: []Queue{{Name: "org"}, {Name: "team", Parent: "org"}, {Name: "other"}, {Name: "quiet"}},
		GPUs: []GPU{
			{Shares: []Share{{Workload: "a", Queue: "team", Use: busy(gpuuse.Measured, 300)}, {Workload: "b", Queue: "org", Use: busy(gpuuse.Measured, 100)}}},
			{Shares: []Share{{Workload: "c", Queue: "team", Use: busy(gpuuse.Simulated, 250)}, {Workload: "d", Queue: "other", Use: &none}, {Workload: "e", Queue: "quiet"}}},
		},
	}
	s.Summarize()
	q := map[string]Queue{}
	for _, x := range s.Queues {
		q[x.Name] = x
	}
	val := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	for _, c := range []struct {
		name      string
		meas, sim any
	}{{"team", int64(300), int64(250)}, {"org", int64(400), int64(250)}, {"other", nil, nil}, {"quiet", nil, nil}} {
		if m, si := val(q[c.name].MeasuredMilli), val(q[c.name].SimulatedMilli); m != c.meas || si != c.sim {
			t.Errorf("queue %s: measured %v simulated %v, want %v and %v", c.name, m, si, c.meas, c.sim)
		}
	}
}

// TestWorkloadUse: Summarize gives each workload's GPUs their share's use
// (by workload and GPU index); a GPU whose share carries none has none.
func TestWorkloadUse(t *testing.T) {
	busy := func(src gpuuse.Source, v int64) *gpuuse.Use { return &gpuuse.Use{Source: src, BusyMilli: &v} }
	s := Snapshot{
		GPUs: []GPU{
			{Index: 0, Shares: []Share{{Workload: "a", Use: busy(gpuuse.Measured, 300)}, {Workload: "b", Use: busy(gpuuse.Simulated, 100)}}},
			{Index: 1, Shares: []Share{{Workload: "a", Use: busy(gpuuse.Measured, 50)}, {Workload: "c"}}},
		},
		Workloads: []Workload{
			{ID: "a", State: StateRunning, GPUs: []WorkloadGPU{{Index: 0}, {Index: 1}}},
			{ID: "b", State: StateRunning, GPUs: []WorkloadGPU{{Index: 0}}},
			{ID: "c", State: StateRunning, GPUs: []WorkloadGPU{{Index: 1}}},
		},
	}
	s.Summarize()
	got := map[string][]any{}
	for _, w := range s.Workloads {
		for _, g := range w.GPUs {
			if g.Use == nil {
				got[w.ID] = append(got[w.ID], nil)
				continue
			}
			got[w.ID] = append(got[w.ID], string(g.Use.Source)+" "+strconv.FormatInt(*g.Use.BusyMilli, 10))
		}
	}
	want := map[string][]any{"a": {"measured 300", "measured 50"}, "b": {"simulated 100"}, "c": {nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("workload use %v, want %v", got, want)
	}
}
