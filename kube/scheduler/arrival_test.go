package scheduler

import (
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/podstatus"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// observing counts the arrivals a policy is told of.
type observing struct {
	placement.Policy
	pods []string
}

func (o *observing) Observe(p *placement.Pod) { o.pods = append(o.pods, p.Name) }

// TestEachPodArrivesOnce: a pending pod teaches the policies once, one
// arrival per GPU container, however many cycles it waits; a pod naming
// another policy teaches both; a pod seen again after it left arrives anew.
func TestEachPodArrivesOnce(t *testing.T) {
	def, err := placement.New(placement.DefaultPolicy, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spread, err := placement.New("spread", placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := &observing{Policy: spread}
	core, err := dispatch.New(dispatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{cfg: Config{Catalog: catalog.Default()}, policy: &observing{Policy: def}, core: core, pending: map[string]*corev1.Pod{},
		podPolicies: map[string]placement.Policy{"spread": own}, arrived: map[types.UID]bool{},
		events: podstatus.New(fake.NewClientset(), fake.NewClientset(), DefaultName, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}
	pod := func(name string, ann map[string]string, ctrs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Annotations: ann},
			Spec: corev1.PodSpec{Containers: ctrs}}
	}
	two := pod("two", nil, corev1.Container{Name: "a", Resources: gpu}, corev1.Container{Name: "b", Resources: gpu})
	cpuOnly := pod("cpu", nil, corev1.Container{Name: "main"})
	named := pod("named", map[string]string{workload.AnnotationPolicy: "spread"}, corev1.Container{Name: "main", Resources: gpu})
	all := []*corev1.Pod{two, cpuOnly, named}
	for cycle := 0; cycle < 3; cycle++ {
		s.observeArrivals(all)
	}
	got := s.policy.(*observing).pods
	want := []string{"default/two/a", "default/two/b", "default/cpu/", "default/named/main"}
	if len(got) != len(want) {
		t.Fatalf("the scheduler's policy was told of %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the scheduler's policy was told of %v, want %v", got, want)
		}
	}
	if len(own.pods) != 1 || own.pods[0] != "default/named/main" {
		t.Fatalf("the pod's own policy was told of %v, want [default/named/main]", own.pods)
	}
	// "two" goes, then a pod of the same UID is pending again.
	s.pending["default/two"] = two
	s.core.Add(s.itemOf(two))
	s.podGone(newSnapshot(booked.New(), s.cfg.Catalog, s.cfg.Log), "default/two")
	s.observeArrivals([]*corev1.Pod{two})
	if n := len(s.policy.(*observing).pods); n != len(want)+2 {
		t.Fatalf("after it left and came back, the policy was told of %d arrivals, want %d", n, len(want)+2)
	}
}
