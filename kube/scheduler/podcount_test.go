package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestNodePodCount is kube-scheduler's row "node allowing 3 pods, 5 pods:
// 3 bound" (issue 36): every pod takes one of its node's slots (CPU-only,
// fractional GPU, whole GPU alike), by class, with no kube-scheduler plugin
// involved; the others wait with the pod count as the reason; a pod that
// leaves frees its slot for exactly one; a restarted scheduler counts the
// bound pods again; and a pod another scheduler bound takes a slot too.
func TestNodePodCount(t *testing.T) {
	ctx, client := controlPlane(t)
	createNodeAllowing(ctx, t, client, "small", "3", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2", "pool": "small"})
	stop := startScheduler(ctx, t, client, nil, nil)

	pool := map[string]string{"pool": "small"}
	createCPUPod(ctx, t, client, "p-0", "100m", pool, nil)
	createCPUPod(ctx, t, client, "p-1", "100m", pool, nil)
	createPod(ctx, t, client, "p-2", "1", map[string]string{workload.AnnotationCompute: "0.25"})
	createPod(ctx, t, client, "p-3", "1", map[string]string{workload.AnnotationCompute: "0.25"})
	createPod(ctx, t, client, "p-4", "1", nil)
	waitFor(t, "3 of 5 bound", func() error { return countBound(ctx, client, "p-", 3) })
	waiting := pendingPods(ctx, t, client, "p-")
	if len(waiting) != 2 {
		t.Fatalf("waiting %v, want 2 pods", waiting)
	}
	for _, name := range waiting {
		waitFor(t, name+" waits for a pod slot", func() error {
			return hasCondition(ctx, client, name, corev1.PodReasonUnschedulable, "node pod limit 3 reached")
		})
	}
	if err := countBound(ctx, client, "p-", 3); err != nil {
		t.Fatal(err)
	}

	// One bound pod leaves: exactly one waiting pod takes its slot.
	bound := boundPods(ctx, t, client, "p-")
	if err := client.CoreV1().Pods("default").Delete(ctx, bound[0], metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one waiting pod bound in the freed slot", func() error {
		if w := pendingPods(ctx, t, client, "p-"); len(w) != 1 {
			return fmt.Errorf("%d waiting, want 1", len(w))
		}
		return countBound(ctx, client, "p-", 3)
	})

	// A node allowing 1 pod, taken by a pod bound without Tessera (a
	// DaemonSet's, a static pod). Made before a restart, so that the
	// scheduler reads it with the bound pods before it decides anything.
	createNodeAllowing(ctx, t, client, "one", "1", map[string]string{"pool": "one"})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-scheduler", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "one", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A restarted scheduler books the bound pods from the API: the node is
	// still full for a pod it meets first.
	stop()
	stop = startScheduler(ctx, t, client, nil, nil)
	defer stop()
	createPod(ctx, t, client, "p-5", "1", map[string]string{workload.AnnotationCompute: "0.25"})
	waitFor(t, "p-5 waits for a pod slot after a restart", func() error {
		return hasCondition(ctx, client, "p-5", corev1.PodReasonUnschedulable, "node pod limit 3 reached")
	})

	// The pod another scheduler bound takes node one's slot.
	createCPUPod(ctx, t, client, "q-0", "100m", map[string]string{"pool": "one"}, nil)
	waitFor(t, "q-0 waits for a pod slot", func() error {
		return hasCondition(ctx, client, "q-0", corev1.PodReasonUnschedulable, "node pod limit 1 reached")
	})
	if err := client.CoreV1().Pods("default").Delete(ctx, "other-scheduler", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "q-0 bound once the slot is free", func() error { return boundTo(ctx, client, "q-0", "one") })
	if err := countBound(ctx, client, "p-", 3); err != nil {
		t.Fatal(err)
	}
}

// createNodeAllowing creates a KWOK node allowing pods pods, with 64 CPUs,
// 256Gi of memory and labels.
func createNodeAllowing(ctx context.Context, t *testing.T, c kubernetes.Interface, name, pods string, labels map[string]string) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse(pods), workload.ResourceGPU: resource.MustParse("32")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pendingPods and boundPods name the pods whose name starts with prefix,
// unbound and bound.
func pendingPods(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) []string {
	t.Helper()
	return podsWhere(ctx, t, c, prefix, false)
}

func boundPods(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) []string {
	t.Helper()
	return podsWhere(ctx, t, c, prefix, true)
}

func podsWhere(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string, bound bool) []string {
	t.Helper()
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if len(p.Name) >= len(prefix) && p.Name[:len(prefix)] == prefix && (p.Spec.NodeName != "") == bound {
			out = append(out, p.Name)
		}
	}
	return out
}
