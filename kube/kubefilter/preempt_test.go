package kubefilter

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestFitsWithout: the preemption dry run. A host port a victim holds is
// freed by stopping it (and the exclusion for preemption lets its node be
// looked at, while a node whose taint the pod does not tolerate stays
// out); stopping the only pod a required affinity matches never makes
// room; a victim the cache does not hold counts for nothing.
func TestFitsWithout(t *testing.T) {
	tainted := node("n2", "", nil)
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []*corev1.Node{node("n1", "", nil), tainted}
	holder := with(pod("holder", "n1", nil, nil), hostPort(8080))
	db := pod("db", "n1", map[string]string{"app": "db"}, nil)
	f := newFilter(t, nodes, []*corev1.Pod{holder, db})
	ctx := context.Background()

	wants := with(pod("wants-port", "", nil, nil), hostPort(8080))
	ex, preempt, concerned, err := f.Exclude(ctx, wants, nodes, nil, nil)
	if err != nil || !concerned {
		t.Fatalf("concerned %v, err %v", concerned, err)
	}
	if !strings.HasPrefix(ex(0), "NodePorts:") || preempt(0) != "" {
		t.Errorf("n1: exclude %q, for preemption %q; want NodePorts, then open", ex(0), preempt(0))
	}
	if !strings.HasPrefix(preempt(1), "TaintToleration:") {
		t.Errorf("n2 for preemption: %q, want the untolerated taint", preempt(1))
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		victims []types.UID
		want    string // prefix of the rejection; "" fits
	}{
		{"port freed", wants, []types.UID{holder.UID}, ""},
		{"port still held", wants, []types.UID{db.UID}, "NodePorts:"},
		{"victim unknown", wants, []types.UID{"no-such-pod"}, "NodePorts:"},
		{"affinity target stopped", with(pod("client", "", nil, nil), affinity(term("app", "db", hostname))), []types.UID{db.UID}, "InterPodAffinity:"},
		{"affinity kept", with(pod("client", "", nil, nil), affinity(term("app", "db", hostname))), []types.UID{holder.UID}, ""},
	} {
		got, err := f.FitsWithout(ctx, tc.pod, "n1", tc.victims)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The dry run leaves the cache as it was.
	if v, err := f.Check(ctx, wants, []string{"n1"}); err != nil || len(v.Fit) != 0 {
		t.Errorf("after the dry runs, wants-port on n1: fit %v, err %v; want still refused", v.Fit, err)
	}
}
