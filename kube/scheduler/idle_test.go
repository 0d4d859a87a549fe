package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// A pod of a queue that reclaims idle holders after an hour holds the
// only GPU; a pod of another queue, of no higher priority, waits. The
// cycle reads the nodes' GPUUse only while a queue sets the time, and
// stops the holder (deleted, with an event saying why) once its GPUUse
// marks it idle an hour, not a minute before.
func TestServeReclaimsIdleHolder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setting string
		idleFor time.Duration
		evicted bool
		reads   int
	}{
		{"idle 59 min", "1h", 59 * time.Minute, false, 1},
		{"idle an hour", "1h", time.Hour + time.Second, true, 1},
		{"setting off: GPUUse not read", "", 24 * time.Hour, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			holder := boundPod("nb", "a", &binding.Assignment{Version: binding.Version, Node: "a", Containers: []binding.Container{{Name: "main",
				GPUs: []binding.Share{{UUID: "a/gpu0", Index: 0, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 4096, MemoryLimitMiB: 4096}}}}})
			holder.UID, holder.Spec.SchedulerName = "nb", DefaultName
			holder.Labels = map[string]string{queues.LabelQueue: "notebooks"}
			holder.Status.StartTime = &metav1.Time{Time: now.Add(-48 * time.Hour)}
			waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "p", Labels: map[string]string{queues.LabelQueue: "batch"}},
				Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}
			client := fake.NewClientset(holder, waiting)
			s, err := New(Config{Client: client, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			use, err := nodeuse.Object("a", nodeuse.Status{Source: "sim", At: now, GPUs: []gpuuse.GPU{{GPU: "a/gpu0", Use: gpuuse.Use{Source: gpuuse.Simulated},
				Shares: []gpuuse.Share{{Workload: "ns/nb", GPU: "a/gpu0", Use: gpuuse.Use{Source: gpuuse.Simulated}, Idle: &gpuuse.Idle{Since: now.Add(-tc.idleFor)}}}}}})
			if err != nil {
				t.Fatal(err)
			}
			reads := 0
			s.useObjects = func() ([]*unstructured.Unstructured, error) { reads++; return []*unstructured.Unstructured{use}, nil }
			spec := map[string]any{}
			if tc.setting != "" {
				spec["idleReclaimAfter"] = tc.setting
			}
			nb := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "notebooks"}, "spec": spec}}
			batch := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "batch"}, "spec": map[string]any{}}}
			tree, skipped, err := queues.Tree([]*unstructured.Unstructured{nb, batch})
			if err != nil || len(skipped) > 0 {
				t.Fatal(err, skipped)
			}
			node := labelNode("a", "1", "H200")
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			snap := s.syncTo(nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{node}, []*corev1.Pod{holder}, nil)
			s.core.Add(s.itemOf(waiting))
			var st CycleStats
			if err := s.serve(context.Background(), snap, tree, []*corev1.Pod{waiting}, map[string]dispatch.GangSpec{}, &st); err != nil {
				t.Fatal(err)
			}
			if reads != tc.reads {
				t.Errorf("GPUUse read %d times, want %d", reads, tc.reads)
			}
			_, err = client.CoreV1().Pods("ns").Get(context.Background(), "nb", metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != tc.evicted {
				t.Fatalf("holder deleted: %v (%v), want %v", gone, err, tc.evicted)
			}
		})
	}
}
