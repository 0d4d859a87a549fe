package scheduler

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

func labelNode(name string, gpus string, model string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"), workload.ResourceGPU: resource.MustParse("128")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodeinventory.LabelModel: model, nodeinventory.LabelCount: gpus}}, Status: corev1.NodeStatus{Allocatable: res}}
}

func boundPod(name, node string, a *binding.Assignment) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{}}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
	if a != nil {
		enc, err := binding.Encode(*a)
		if err != nil {
			panic(err)
		}
		p.Annotations[binding.AnnotationKey] = enc
	}
	return p
}

func share(uuid string, milli int64) binding.Share {
	return binding.Share{UUID: uuid, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 1024, MemoryLimitMiB: 1024}
}

func TestBuildSnapshot(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := nodeinventory.Labels{Catalog: catalogtest.Small()}
	nodes := []*corev1.Node{
		labelNode("b", "2", "H200"),
		labelNode("a", "1", "L4"),
		labelNode("broken", "2", "H9000"), // unknown model: left out, not fatal
	}
	pods := []*corev1.Pod{
		boundPod("p1", "b", &binding.Assignment{Version: 1, Node: "b", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{share("b/gpu1", 600)}}}}),
		// Over capacity (inconsistent with p1): booked, saturating at zero.
		boundPod("p2", "b", &binding.Assignment{Version: 1, Node: "b", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{share("b/gpu1", 600)}}}}),
		boundPod("p3", "a", nil),    // CPU only
		boundPod("p4", "gone", nil), // node no longer exists
		func() *corev1.Pod {
			p := boundPod("p5", "a", nil)
			p.Annotations[binding.AnnotationKey] = "{"
			return p
		}(),
	}
	for _, p := range pods {
		p.Spec.SchedulerName = DefaultName // exactly booked pods of ours are preemption candidates
	}
	s := buildSnapshot(log, inv, nodes, pods)
	if len(s.nodes) != 2 || s.nodes[0].Name != "a" || s.nodes[1].Name != "b" {
		t.Fatalf("nodes = %v", s.nodes)
	}
	b := s.cluster.Nodes[index(s, "b")]
	if b.GPUs[0].FreeMilli != 1000 || b.GPUs[1].FreeMilli != 0 {
		t.Errorf("node b GPUs free = %d, %d; want 1000, 0", b.GPUs[0].FreeMilli, b.GPUs[1].FreeMilli)
	}
	if b.FreeCPUMilli != 8000-4000 {
		t.Errorf("node b CPU free = %d", b.FreeCPUMilli)
	}
	a := s.cluster.Nodes[index(s, "a")]
	if a.FreeCPUMilli != 8000-4000 || a.GPUs[0].FreeMilli != 1000 {
		t.Errorf("node a: CPU free %d, GPU free %d", a.FreeCPUMilli, a.GPUs[0].FreeMilli)
	}
	run := byID(s.books.Running())
	if p1, p2 := run["ns/p1"], run["ns/p2"]; len(run) != 4 || len(p1.Decisions) != 1 || !slices.Equal(p1.Decisions[0].GPUs, []int{1}) || p1.Stopping || !p2.Stopping {
		t.Errorf("running %+v, want p3 and p5 on a; p1 on b's GPU 1; p2 there saturating (no candidate)", run)
	}
}
