package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
)

// TestRunningPods: booked pods become the cycle's Running workloads; only
// this scheduler's exactly booked, live pods may be victims, a pod's start
// time is its runtime's, and every running gang's minimum reaches the
// cycle (it keeps gangs at their minimum when it chooses victims).
func TestRunningPods(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := func(name, scheduler string, mut func(*corev1.Pod)) *corev1.Pod {
		node, cpu := "n0", "1"
		if name == "inexact" {
			node, cpu = "n1", "64" // more than the node has
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{SchedulerName: scheduler, NodeName: node,
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	member := func(p *corev1.Pod) {
		p.Labels = map[string]string{membership.LabelPodGroup: "g"}
		p.Annotations = map[string]string{membership.AnnotationMinMember: "2"}
		p.Status.StartTime = &started
	}
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	snap := s.syncTo(nodeinventory.Labels{Catalog: catalog.Default()}, []*corev1.Node{labelNode("n0", "1", "H100"), labelNode("n1", "1", "H100")},
		[]*corev1.Pod{pod("ours", DefaultName, member), pod("other", "default-scheduler", nil), pod("inexact", DefaultName, nil), pod("leaving", DefaultName, deleting)}, nil)
	gangs := map[string]dispatch.GangSpec{}
	s.runningGangs(snap, gangs)
	run := snap.books.Running()
	stopping := map[string]bool{}
	for _, r := range run {
		stopping[r.ID] = r.Stopping
		if p, ok := snap.pods[r.ID]; !ok || p == nil {
			t.Errorf("%s: no pod for it", r.ID)
		}
	}
	want := map[string]bool{"ns/ours": false, "ns/other": true, "ns/inexact": true, "ns/leaving": true}
	for id, w := range want {
		if got, ok := stopping[id]; !ok || got != w {
			t.Errorf("%s: Stopping = %v (present %v), want %v", id, got, ok, w)
		}
	}
	if run[0].ID != "ns/ours" || !run[0].Started.Equal(started.Time) || run[0].Gang != "ns/g" {
		t.Errorf("ours: %+v, want started %v in gang ns/g", run[0], started.Time)
	}
	if gangs["ns/g"].Min != 2 {
		t.Errorf("gang ns/g minimum %d, want 2", gangs["ns/g"].Min)
	}
}
