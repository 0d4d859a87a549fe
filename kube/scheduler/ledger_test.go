package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/queueing"
)

// TestCycleLedgerCountsItsBookings: the queues' usage a cycle reports
// (its usage before, plus the bookings it made) is what the snapshot's
// bookings add up to afterwards, queue by queue.
func TestCycleLedgerCountsItsBookings(t *testing.T) {
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}
	pending := func(name, queue string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{queues.LabelQueue: queue}},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main", Resources: gpu}}}}
	}
	a, b := pending("a", "team-a"), pending("b", "team-b")
	reg := prometheus.NewRegistry()
	s, err := New(Config{Client: fake.NewClientset(a, b), Metrics: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := queueing.NewTree([]queueing.Queue{{Name: "team-a"}, {Name: "team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	node := labelNode("n0", "4", "H100")
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	running := boundPod("running", "n0", nil)
	running.Labels = map[string]string{queues.LabelQueue: "team-a"}
	snap := s.syncTo(nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{node}, []*corev1.Pod{running}, nil)
	var st CycleStats
	s.core.Add(s.itemOf(a))
	s.core.Add(s.itemOf(b))
	if err := s.serve(context.Background(), snap, tree, []*corev1.Pod{a, b}, map[string]dispatch.GangSpec{}, &st); err != nil || st.Bound != 2 {
		t.Fatalf("serve: %v, %+v; want both bound", err, st)
	}
	after := snap.ledger(tree)
	for _, q := range []string{"team-a", "team-b"} {
		if got, want := queueGauge(t, reg, "tessera_scheduler_queue_gpu_used", q), float64(after.Used(q).GPUMilli)/1000; got != want || want == 0 {
			t.Errorf("queue %s: the cycle reported %v GPUs used, its bookings add up to %v", q, got, want)
		}
	}
}
