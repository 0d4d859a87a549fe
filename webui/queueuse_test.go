package webui

import (
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
