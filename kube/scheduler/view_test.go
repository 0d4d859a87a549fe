package scheduler

import (
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// TestView: the published view is the cycle's snapshot read back — each
// GPU's free compute and memory as placement books them, the pods booked
// on each node with their assignments, the queues' use and fair share by
// the scheduler's ledger, and the pending pods in queue order with their
// PodScheduled reason (a pod the cycle placed is no longer pending). A
// change channel closes when a cycle publishes different objects, not
// when it publishes the same ones again.
func TestView(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset(), Name: "tessera", Policy: "binpack"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.View(); ok {
		t.Fatal("a view before the first cycle")
	}
	log := slog.New(slog.NewTextHandler(testWriter{T: t}, nil))
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Labels: map[string]string{nodeinventory.LabelCount: "2", nodeinventory.LabelModel: "H100-SXM"}},
		Status: corev1.NodeStatus{Allocatable: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	bound := func(name, queue string, milli, limit, mem int64, gpu int) *corev1.Pod {
		a := binding.Assignment{Node: "n1", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{{
			UUID: "n1/gpu" + string(rune('0'+gpu)), Index: gpu, ComputeMilli: milli, ComputeLimitMilli: limit, MemoryMiB: mem, MemoryLimitMiB: mem}}}}}
		enc, err := binding.Encode(a)
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1",
				Labels: map[string]string{queues.LabelQueue: queue}, Annotations: map[string]string{binding.AnnotationKey: enc}},
			Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: "tessera", Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		}
	}
	pending := func(name, gpus string, cond *corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1"},
			Spec: corev1.PodSpec{SchedulerName: "tessera", Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)}}}}},
		}
		if cond != nil {
			p.Status.Conditions = []corev1.PodCondition{*cond}
		}
		return p
	}
	a := bound("a", "research", 500, 800, 20480, 0)
	b := bound("b", "default", 250, 250, 10240, 0)
	waits := pending("waits", "4", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reasonUnschedulable, Message: "no node fits 4 GPU(s)"})
	placedNow := pending("placed-now", "1", nil)
	fresh := pending("fresh", "1", nil)
	snap := buildSnapshot(log, nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{node}, []*corev1.Pod{a, b})
	// The cycle placed placed-now: it is booked on the node (assumed).
	placed := placedNow.DeepCopy()
	placed.Spec.NodeName = "n1"
	s.bookPod(snap, placed)
	tree, err := queueing.NewTree([]queueing.Queue{{Name: "research", Guaranteed: queueing.Resources{GPUMilli: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	changed := s.ViewChanged()
	s.publishView(at, snap, tree, []*corev1.Pod{waits, placedNow, fresh}, map[string]int{"default": 3})
	select {
	case <-changed:
	default:
		t.Error("the first view did not signal a change")
	}

	v, ok := s.View()
	if !ok {
		t.Fatal("no view after a cycle")
	}
	if !v.Time.Equal(at) || v.Scheduler != "tessera" || v.Policy != "binpack" || len(v.Nodes) != 1 {
		t.Fatalf("view %+v", v)
	}
	n := v.Nodes[0]
	if n.Name != "n1" || !n.Ready || n.Source != "node-labels" || len(n.GPUs) != 2 || len(n.Pods) != 3 {
		t.Fatalf("node %+v", n)
	}
	model, err := catalog.Default().Resolve("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	mem := model.MemoryMiB
	if g := n.GPUs[0]; !g.Schedulable || g.FreeMilli != 250 || g.FreeMemoryMiB != mem-30720 || g.UUID != "n1/gpu0" {
		t.Errorf("GPU 0: %+v, want 250 milli and %d MiB free", g, mem-30720)
	}
	if g := n.GPUs[1]; g.FreeMilli != 1000 || g.FreeMemoryMiB != mem {
		t.Errorf("GPU 1: %+v, want free", g)
	}
	if p := n.Pods[0]; p.Name != "a" || p.Queue != "research" || p.Node != "n1" || p.Assignment == nil || p.Assignment.Containers[0].GPUs[0].ComputeLimitMilli != 800 {
		t.Errorf("pod a: %+v", p)
	}
	var names []string
	for _, p := range v.Pending {
		names = append(names, p.Name)
	}
	if len(names) != 2 || names[0] != "waits" || names[1] != "fresh" {
		t.Fatalf("pending %v, want [waits fresh] (placed-now was placed)", names)
	}
	if p := v.Pending[0]; p.Reason != reasonUnschedulable || p.Message != "no node fits 4 GPU(s)" || len(p.Requests) != 1 || p.Requests[0].Count != 4 {
		t.Errorf("waits: %+v", p)
	}
	if p := v.Pending[1]; p.Reason != "" || p.Message != "" {
		t.Errorf("fresh has a reason: %+v", p)
	}
	byName := map[string]clusterview.QueueView{}
	for _, q := range v.Queues {
		byName[q.Name] = q
	}
	ledger := tree.NewLedger(queueing.Resources{GPUMilli: 2000, GPUMemoryMiB: 2 * mem, CPUMilli: 32000, MemoryMiB: 128 << 10},
		map[string]queueing.Resources{"research": {GPUMilli: 500, GPUMemoryMiB: 20480, CPUMilli: 1000}, "default": {GPUMilli: 250, GPUMemoryMiB: 10240, CPUMilli: 1000}})
	if q := byName["research"]; !q.Configured || q.Used.GPUMilli != 500 || q.Running != 1 || q.Share != ledger.Share("research") || q.Guaranteed.GPUMilli != 1000 {
		t.Errorf("research: %+v, want share %v", q, ledger.Share("research"))
	}
	if q := byName["default"]; q.Configured || q.Used.GPUMilli != 250 || q.Running != 2 || q.Waiting != 3 {
		t.Errorf("default: %+v", q)
	}

	// The same objects again, listed in another order: no change; a pod
	// that changed: a change.
	changed = s.ViewChanged()
	s.publishView(at.Add(time.Second), snap, tree, []*corev1.Pod{waits, placedNow, fresh}, map[string]int{"default": 3})
	select {
	case <-changed:
		t.Error("the same objects signalled a change")
	default:
	}
	if v, _ := s.View(); !v.Time.Equal(at.Add(time.Second)) {
		t.Errorf("the view was not replaced: %v", v.Time)
	}
	waits2 := waits.DeepCopy()
	waits2.ResourceVersion = "2"
	s.publishView(at.Add(2*time.Second), snap, tree, []*corev1.Pod{waits2, placedNow, fresh}, map[string]int{"default": 3})
	select {
	case <-changed:
	default:
		t.Error("a changed pod did not signal a change")
	}
}

// TestViewFragmentation: the view reports the simulator's fragmentation
// of the cycle's cluster against the typical pods the policy has learned
// when the cycle ended, and none while it has learned none.
func TestViewFragmentation(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset(), Name: "tessera", Policy: "tessera"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{T: t}, nil))
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Labels: map[string]string{nodeinventory.LabelCount: "2", nodeinventory.LabelModel: "H100-SXM"}},
		Status: corev1.NodeStatus{Allocatable: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	snap := buildSnapshot(log, nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{node}, nil)
	tree, err := queueing.NewTree(nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.publishView(at, snap, tree, nil, nil)
	if v, _ := s.View(); v.Typical != 0 || v.FragmentationMilli != 0 {
		t.Errorf("nothing learned: typical %d, fragmentation %v; want none", v.Typical, v.FragmentationMilli)
	}
	// A 0.3 GPU pod on one of the two GPUs leaves 0.7 that more 0.8 GPU
	// pods (what the policy has seen) cannot use.
	obs := s.policy.(placement.Observer)
	for range 3 {
		obs.Observe(&placement.Pod{CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: 800, ComputeLimitMilli: 800}})
	}
	p := placement.Pod{Name: "small", CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: 300, ComputeLimitMilli: 300}}
	if err := snap.cluster.Apply(&p, placement.Decision{Node: 0, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	s.publishView(at.Add(time.Second), snap, tree, nil, nil)
	v, _ := s.View()
	want := placement.ClusterFragmentation(snap.cluster, placement.TypicalOf(s.policy))
	if v.Typical == 0 || v.FragmentationMilli != want || want < 700 {
		t.Errorf("typical %d, fragmentation %v; want %v (at least the 0.7 GPU the 0.8 pods cannot use)", v.Typical, v.FragmentationMilli, want)
	}
}
