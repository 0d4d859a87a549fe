package scheduler

import (
	"context"
	"fmt"

	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
)

// TestQueuesFairShare: queues with guarantees split a full node by fair
// share, not arrival order; a queue's hard limit holds; an unknown queue is
// reported.
func TestQueuesFairShare(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "team-a", map[string]any{"guaranteed": map[string]any{"gpu": "2"}})
	createQueue(ctx, t, dyn, "team-b", map[string]any{"guaranteed": map[string]any{"gpu": "2"}})
	createQueue(ctx, t, dyn, "capped", map[string]any{"limit": map[string]any{"gpu": "1"}})
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "5"})
	inQueue := func(name, queue string) {
		createPodWith(ctx, t, client, name, "1", map[string]string{queues.LabelQueue: queue}, nil)
	}
	// team-a arrives first with more than the whole node's worth.
	for i := 0; i < 6; i++ {
		inQueue(fmt.Sprintf("a-%d", i), "team-a")
	}
	inQueue("b-0", "team-b")
	inQueue("b-1", "team-b")
	inQueue("c-0", "capped")
	inQueue("c-1", "capped")
	inQueue("ghost-0", "ghost")
	reg := prometheus.NewRegistry()
	stop := startScheduler(ctx, t, client, dyn, reg)
	defer stop()
	waitFor(t, "team-b gets its guarantee", func() error { return countBound(ctx, client, "b-", 2) })
	waitFor(t, "capped gets one GPU", func() error { return countBound(ctx, client, "c-", 1) })
	waitFor(t, "team-a gets its guarantee", func() error { return countBound(ctx, client, "a-", 2) })
	waitFor(t, "capped's second pod hits the limit", func() error {
		for _, n := range []string{"c-0", "c-1"} {
			if hasCondition(ctx, client, n, reasonQueueLimit, "queue capped: would use") == nil {
				return nil
			}
		}
		return fmt.Errorf("no capped pod reports the queue limit")
	})
	waitFor(t, "unknown queue reported", func() error {
		return hasCondition(ctx, client, "ghost-0", reasonInvalid, `label tessera.io/queue: queue "ghost" does not exist`)
	})
	waitFor(t, "per-queue metrics", func() error {
		for q, want := range map[string][2]float64{"team-b": {2, 2}, "capped": {1, 0}, "team-a": {2, 2}} {
			used, guaranteed := queueGauge(t, reg, "tessera_scheduler_queue_gpu_used", q), queueGauge(t, reg, "tessera_scheduler_queue_gpu_guaranteed", q)
			if used != want[0] || guaranteed != want[1] {
				return fmt.Errorf("queue %s: used %v guaranteed %v, want %v", q, used, guaranteed, want)
			}
		}
		// team-a's four over its share wait, capped's second waits out
		// its limit; ghost's pod names no queue of the tree.
		for q, want := range map[string]float64{"team-a": 4, "capped": 1, "team-b": 0, "ghost": -1} {
			if got := queueGauge(t, reg, "tessera_scheduler_queue_pending_pods", q); got != want {
				return fmt.Errorf("queue %s: %v pending, want %v", q, got, want)
			}
		}
		return nil
	})
}

// controlPlaneDyn is controlPlane plus a dynamic client.
func controlPlaneDyn(t *testing.T) (context.Context, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	ctx, client := controlPlane(t)
	return ctx, client, dynamicFor(t, client)
}

// queueGauge reads a per-queue gauge from reg (-1 when absent).
func queueGauge(t *testing.T, reg *prometheus.Registry, name, queue string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
