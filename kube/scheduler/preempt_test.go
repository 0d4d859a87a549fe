package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRanLongEnough(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset(), PreemptionMinRuntime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	started := func(ago time.Duration) *corev1.Pod {
		st := metav1.NewTime(time.Now().Add(-ago))
		return &corev1.Pod{Status: corev1.PodStatus{StartTime: &st}}
	}
	if s.ranLongEnough(&corev1.Pod{}) {
		t.Error("a pod that has not started is protected")
	}
	if s.ranLongEnough(started(10 * time.Second)) {
		t.Error("a pod 10s into a 1m minimum is protected")
	}
	if !s.ranLongEnough(started(2 * time.Minute)) {
		t.Error("a pod past its minimum runtime is not protected")
	}
	s.cfg.PreemptionMinRuntime = 0
	if !s.ranLongEnough(&corev1.Pod{}) {
		t.Error("without a minimum, nothing is protected")
	}
}

func TestGangSurplus(t *testing.T) {
	member := func(group, min string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{LabelPodGroup: group}, Annotations: map[string]string{AnnotationMinMember: min}}}
	}
	snap := &snapshot{onNode: [][]booking{
		{{pod: member("a", "2")}, {pod: member("a", "2")}, {pod: member("b", "1")}},
		{{pod: member("a", "2")}, {pod: member("b", "1")}, {pod: &corev1.Pod{}}},
	}}
	s, err := New(Config{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	got := s.gangSurplus(snap)
	if got["ns/a"] != 1 || got["ns/b"] != 1 || len(got) != 2 {
		t.Errorf("gangSurplus = %v, want ns/a:1 ns/b:1", got)
	}
}
