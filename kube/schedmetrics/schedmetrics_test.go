package schedmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/queueing"
)

// TestQueuePendingGauge: every queue of the tree has a pending count (0
// when none waits), pods of a queue the tree lacks are left out, and a
// queue that leaves the tree leaves the metric.
func TestQueuePendingGauge(t *testing.T) {
	tree := func(names ...string) *queueing.Tree {
		t.Helper()
		var qs []queueing.Queue
		for _, n := range names {
			qs = append(qs, queueing.Queue{Name: n})
		}
		tr, err := queueing.NewTree(qs)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	steps := []struct {
		name    string
		tree    *queueing.Tree
		waiting map[string]int
		want    map[string]float64 // queue -> value; absent queues must be absent
	}{
		{"counts per queue, zero for idle ones, unknown queue left out",
			tree("team-a", "team-b"), map[string]int{"team-a": 4, "ghost": 1},
			map[string]float64{"team-a": 4, "team-b": 0, queueing.DefaultQueue: 0}},
		{"a queue removed from the tree disappears",
			tree("team-a"), map[string]int{queueing.DefaultQueue: 2},
			map[string]float64{"team-a": 0, queueing.DefaultQueue: 2}},
	}
	reg := prometheus.NewRegistry()
	m := New(reg)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			m.ObservePending(s.tree, s.waiting)
			got := map[string]float64{}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "tessera_scheduler_queue_pending_pods" {
					continue
				}
				for _, mt := range mf.GetMetric() {
					for _, l := range mt.GetLabel() {
						if l.GetName() == "queue" {
							got[l.GetValue()] = mt.GetGauge().GetValue()
						}
					}
				}
			}
			if len(got) != len(s.want) {
				t.Errorf("queues %v, want %v", got, s.want)
			}
			for q, v := range s.want {
				if g, ok := got[q]; !ok || g != v {
					t.Errorf("queue %s: %v (present %v), want %v", q, g, ok, v)
				}
			}
		})
	}
}
