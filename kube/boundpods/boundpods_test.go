package boundpods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/binding"
)

func pod(name, node string, phase corev1.PodPhase, a *binding.Assignment) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	if a != nil {
		enc, err := binding.Encode(*a)
		if err != nil {
			panic(err)
		}
		p.Annotations[binding.AnnotationKey] = enc
	}
	return p
}

func share(uuid string, milli, mem int64) binding.Share {
	return binding.Share{UUID: uuid, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: mem, MemoryLimitMiB: mem}
}

func assign(node string, ctrs ...binding.Container) *binding.Assignment {
	return &binding.Assignment{Version: binding.Version, Node: node, Containers: ctrs}
}

func TestOccupies(t *testing.T) {
	for _, tc := range []struct {
		node  string
		phase corev1.PodPhase
		want  bool
	}{
		{"", corev1.PodPending, false},
		{"n", corev1.PodPending, true},
		{"n", corev1.PodRunning, true},
		{"n", corev1.PodUnknown, true},
		{"n", corev1.PodSucceeded, false},
		{"n", corev1.PodFailed, false},
	} {
		if got := Occupies(pod("p", tc.node, tc.phase, nil)); got != tc.want {
			t.Errorf("node %q phase %q: Occupies = %v, want %v", tc.node, tc.phase, got, tc.want)
		}
	}
}

func TestAssignment(t *testing.T) {
	if a, err := Assignment(pod("p", "n", corev1.PodRunning, nil)); a != nil || err != nil {
		t.Errorf("no annotation: %v, %v", a, err)
	}
	want := assign("n", binding.Container{Name: "main", GPUs: []binding.Share{share("g0", 500, 1024)}})
	a, err := Assignment(pod("p", "n", corev1.PodRunning, want))
	if err != nil || a == nil || a.Containers[0].GPUs[0].ComputeMilli != 500 {
		t.Errorf("assignment: %+v, %v", a, err)
	}
	bad := pod("p", "n", corev1.PodRunning, nil)
	bad.Annotations[binding.AnnotationKey] = "{"
	if _, err := Assignment(bad); err == nil || !strings.Contains(err.Error(), "annotation tessera.io/assignment") {
		t.Errorf("malformed: err = %v", err)
	}
}

func TestHoldings(t *testing.T) {
	bad := pod("bad", "n1", corev1.PodRunning, nil)
	bad.Annotations[binding.AnnotationKey] = `{"v":1}`
	pods := []*corev1.Pod{
		// Two containers of one pod on one GPU: one pod, both shares.
		pod("a", "n1", corev1.PodRunning, assign("n1",
			binding.Container{Name: "c1", GPUs: []binding.Share{share("g0", 250, 100), share("g1", 250, 100)}},
			binding.Container{Name: "c2", GPUs: []binding.Share{share("g0", 250, 100)}})),
		pod("b", "n1", corev1.PodPending, assign("n1", binding.Container{Name: "c", GPUs: []binding.Share{share("g0", 300, 50)}})),
		// Finished or unbound pods hold nothing.
		pod("done", "n1", corev1.PodSucceeded, assign("n1", binding.Container{Name: "c", GPUs: []binding.Share{share("g1", 1000, 50)}})),
		pod("failed", "n1", corev1.PodFailed, assign("n1", binding.Container{Name: "c", GPUs: []binding.Share{share("g1", 1000, 50)}})),
		pod("waiting", "", corev1.PodPending, assign("n1", binding.Container{Name: "c", GPUs: []binding.Share{share("g1", 1000, 50)}})),
		// Counted on the node it is bound to, as the scheduler does.
		pod("moved", "n2", corev1.PodRunning, assign("n1", binding.Container{Name: "c", GPUs: []binding.Share{share("g9", 1000, 50)}})),
		pod("cpu", "n2", corev1.PodRunning, nil),
		bad,
	}
	got, errs := Holdings(pods)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "pod ns/bad: annotation tessera.io/assignment") {
		t.Errorf("errs = %v", errs)
	}
	want := map[string]map[string]Held{
		"n1": {"g0": {ComputeMilli: 800, MemoryMiB: 250, Pods: 2}, "g1": {ComputeMilli: 250, MemoryMiB: 100, Pods: 1}},
		"n2": {"g9": {ComputeMilli: 1000, MemoryMiB: 50, Pods: 1}},
	}
	if len(got) != len(want) {
		t.Fatalf("Holdings = %+v, want %+v", got, want)
	}
	for node, gpus := range want {
		if len(got[node]) != len(gpus) {
			t.Errorf("node %s: %+v, want %+v", node, got[node], gpus)
		}
		for uuid, h := range gpus {
			if got[node][uuid] != h {
				t.Errorf("node %s GPU %s: %+v, want %+v", node, uuid, got[node][uuid], h)
			}
		}
	}
}

// Hold books a bound pod's host requests as kube-scheduler counts them
// (the larger of the init containers and the sum of the containers, plus
// overhead), its priority and start, and one share group per assigned
// container; its key changes with what it books and nothing else.
func TestHold(t *testing.T) {
	a := assign("n1", binding.Container{Name: "main", GPUs: []binding.Share{share("g0", 500, 1024)}},
		binding.Container{Name: "side", GPUs: []binding.Share{share("g1", 250, 512), share("g2", 250, 512)}})
	p := pod("p", "n1", corev1.PodRunning, a)
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: req("1", "1Gi")}, {Name: "side", Resources: req("500m", "512Mi")}}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: req("2", "100Mi")}}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	prio := int32(7)
	p.Spec.Priority = &prio
	start := metav1.NewTime(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	p.Status.StartTime = &start

	h, err := Hold(p)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID != "ns/p" || h.Node != "n1" || h.CPUMilli != 2100 || h.MemoryMiB != 1537 || !h.Slot || h.Priority != 7 || !h.Started.Equal(start.Time) {
		t.Fatalf("hold %+v: want ns/p on n1, 2100m CPU (init 2 > 1.5, + 0.1), 1537 MiB (1.5Gi + 1Mi), a pod slot, priority 7, started at 03:00", h)
	}
	if len(h.Groups) != 2 || len(h.Groups[0]) != 1 || len(h.Groups[1]) != 2 || h.Groups[1][1].UUID != "g2" {
		t.Fatalf("groups %+v, want one per container: [g0] [g1 g2]", h.Groups)
	}
	if h.Key != HoldKey(p) {
		t.Fatalf("Hold's key %q differs from HoldKey's %q", h.Key, HoldKey(p))
	}
	same := p.DeepCopy()
	same.Status.Phase, same.Labels = corev1.PodSucceeded, map[string]string{"x": "y"}
	if HoldKey(same) != h.Key {
		t.Error("a change of what is not booked (phase, labels) changed the key")
	}
	moved := p.DeepCopy()
	moved.Spec.Containers[0].Resources = req("3", "1Gi")
	if HoldKey(moved) == h.Key {
		t.Error("a change of the CPU booked left the key unchanged")
	}

	bad := pod("bad", "n1", corev1.PodRunning, nil)
	bad.Annotations[binding.AnnotationKey] = "{not json"
	if h, err := Hold(bad); err == nil || h.Groups != nil || !strings.Contains(err.Error(), binding.AnnotationKey) {
		t.Fatalf("malformed assignment: %+v, %v; want no groups and an error naming the annotation", h, err)
	}
}
