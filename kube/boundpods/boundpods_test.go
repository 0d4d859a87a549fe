package boundpods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
