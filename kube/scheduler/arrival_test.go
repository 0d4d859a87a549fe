package scheduler

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// observing counts the arrivals a policy is told of.
type observing struct {
	placement.Policy
	pods []string
}

func (o *observing) Observe(p *placement.Pod) { o.pods = append(o.pods, p.Name) }

// TestEachPodArrivesOnce: a pending pod teaches the policies once (the
// core tells them, package dispatch), one arrival per GPU container,
// however many cycles it waits; a pod naming another policy teaches both;
// an invalid pod teaches nothing; a pod made again after it left arrives
// anew.
func TestEachPodArrivesOnce(t *testing.T) {
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}
	pod := func(name string, ann map[string]string, ctrs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: ctrs}}
	}
	two := pod("two", nil, corev1.Container{Name: "a", Resources: gpu}, corev1.Container{Name: "b", Resources: gpu})
	// Too much CPU for the node, so that it waits too.
	cpuOnly := pod("cpu", nil, corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}}})
	// A learning policy of its own (FGD, online: it knows no workload).
	named := pod("named", map[string]string{workload.AnnotationPolicy: "fgd"}, corev1.Container{Name: "main", Resources: gpu})
	invalid := pod("invalid", nil, corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("0.3")}}})
	all := []*corev1.Pod{two, cpuOnly, named, invalid}

	s, err := New(Config{Client: fake.NewClientset(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	def := &observing{Policy: s.policy}
	s.policy = def
	node := labelNode("n0", "0", "H100") // no GPU: every pod waits
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	snap := s.syncTo(nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{node}, nil, nil)
	tree, err := queueing.NewTree(nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(pending []*corev1.Pod) {
		t.Helper()
		var st CycleStats
		if err := s.serve(context.Background(), snap, tree, pending, map[string]dispatch.GangSpec{}, &st); err != nil {
			t.Fatal(err)
		}
		if st.Bound != 0 {
			t.Fatalf("%d pods bound, want all waiting", st.Bound)
		}
	}
	for _, p := range all {
		s.takePod(snap, p)
	}
	for range 3 {
		serve(all)
	}
	want := []string{"default/two/a", "default/two/b", "default/cpu/", "default/named/main"}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(def.pods))
	if !slices.Equal(got, want) {
		t.Fatalf("the scheduler's policy was told of %v, want %v", got, want)
	}
	own, err := s.policyFor(named)
	if err != nil {
		t.Fatal(err)
	}
	// The pod's own policy learned of it alone: one shape, its one GPU.
	if typ := placement.TypicalOf(own); own == s.policy || len(typ) != 1 {
		t.Fatalf("the named policy learned %v, want the named pod's shape alone", typ)
	}

	// "two" goes, then a pod of its name is pending again.
	s.podGone(snap, "default/two")
	s.takePod(snap, two)
	serve(all)
	if n := len(def.pods); n != len(want)+2 {
		t.Fatalf("after it left and came back, the policy was told of %d arrivals, want %d", n, len(want)+2)
	}
}
