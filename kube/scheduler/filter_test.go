package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestExcludeReasons: a node's own state (unschedulable, not Ready: read
// once per snapshot) closes it in the engine's cluster for every pod, and
// a pod's filter rules nodes out for the pod's constraints (taints,
// nodeSelector) and for the node's sharing (a fraction on exclusive GPUs),
// each with its reason, and keeps the node that passes all. A pod nothing
// can rule out has no filter at all (the policy places it by class).
func TestExcludeReasons(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node := func(name string, mod func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2", "zone": "a"}},
			Status: corev1.NodeStatus{Conditions: ready}}
		mod(n)
		return n
	}
	nodes := []*corev1.Node{
		node("a-ok", func(*corev1.Node) {}),
		node("b-cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("c-not-ready", func(n *corev1.Node) { n.Status.Conditions = nil }),
		node("d-tainted", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
		}),
		node("e-other-zone", func(n *corev1.Node) { n.Labels["zone"] = "b" }),
	}
	snap := buildSnapshot(s.cfg.Log, nodeinventory.Labels{Catalog: catalog.Default()}, nodes, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Annotations: map[string]string{workload.AnnotationCompute: "0.5"}},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, NodeSelector: map[string]string{"zone": "a"}, Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}
	w, _, err := s.workloadOf(snap, pod)
	if err != nil {
		t.Fatal(err)
	}
	closed := map[string]string{"b-cordoned": "node is unschedulable", "c-not-ready": "node is not Ready"}
	want := map[string]string{
		"a-ok": "", "b-cordoned": "", "c-not-ready": "",
		"d-tainted": "untolerated taint dedicated", "e-other-zone": "node selector or affinity does not match",
	}
	for i, n := range snap.nodes {
		if got := w.Exclude(i); got != want[n.Name] {
			t.Errorf("node %s: excluded for %q, want %q", n.Name, got, want[n.Name])
		}
		if got := snap.cluster.Nodes[i].Closed; got != closed[n.Name] {
			t.Errorf("node %s: closed for %q, want %q", n.Name, got, closed[n.Name])
		}
	}
	// Without the selector, the taint still needs a look at each node;
	// without the tainted node too, nothing does.
	free := pod.DeepCopy()
	free.Spec.NodeSelector = nil
	if w, _, err := s.workloadOf(snap, free); err != nil || w.Exclude == nil {
		t.Errorf("a pod beside a tainted node has no filter (%v)", err)
	}
	untainted := buildSnapshot(s.cfg.Log, nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{nodes[0], nodes[1], nodes[2], nodes[4]}, nil)
	if w, _, err := s.workloadOf(untainted, free); err != nil || w.Exclude != nil {
		t.Errorf("a pod nothing rules out has a filter (%v)", err)
	}
	if w, _, err := s.workloadOf(untainted, pod); err != nil || w.Exclude == nil || w.Exclude(index(untainted, "e-other-zone")) == "" {
		t.Errorf("a pod with a node selector has no filter ruling out the other zone (%v)", err)
	}

	// Exclusive GPUs take whole GPUs only: the same pod is ruled out of a
	// node whose inventory says so.
	snap.sharing[0].Fractions = false
	if got, want := w.Exclude(0), "GPUs are exclusive (sharing: exclusive): whole GPUs only"; got != want {
		t.Errorf("exclusive node: excluded for %q, want %q", got, want)
	}
}

// index is the position of the node named name on snap (-1: none).
func index(snap *snapshot, name string) int {
	if ni, ok := snap.books.Index(name); ok {
		return ni
	}
	return -1
}

// workloadOf is podWorkOf's workload and requests.
func (s *Scheduler) workloadOf(snap *snapshot, pod *corev1.Pod) (cycle.Workload, []workload.ContainerRequest, error) {
	pw, err := s.podWorkOf(context.Background(), snap, pod)
	return pw.w, pw.reqs, err
}
