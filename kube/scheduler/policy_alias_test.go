package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// "default" names the default policy in the scheduler's config and in the
// per-pod annotation, and is the same policy as its canonical name: pods
// writing either share one instance (the learning policies learn from both).
func TestPolicyDefaultAlias(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset(), Policy: "default"})
	if err != nil {
		t.Fatalf("--policy default: %v", err)
	}
	if got := s.policy.Name(); got != placement.DefaultPolicy {
		t.Errorf("--policy default built %q, want %q", got, placement.DefaultPolicy)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{workload.AnnotationPolicy: name}}}
	}
	byAlias, err := s.policyFor(pod(" Default"))
	if err != nil {
		t.Fatalf("annotation default: %v", err)
	}
	byName, err := s.policyFor(pod("tessera"))
	if err != nil {
		t.Fatal(err)
	}
	if byAlias.Name() != placement.DefaultPolicy || byAlias != byName {
		t.Errorf("annotation default gave %q, a different instance from annotation tessera: want one tessera policy for both", byAlias.Name())
	}
}
