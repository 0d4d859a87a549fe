package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/cycle"
)

// TestIncompleteGangDoesNotBackOff: a gang still missing members is left
// pending with its reason but not backed off (its next member's arrival
// is what helps, and a backoff recorded by a cycle that ran while that
// member arrived would hold the complete gang back); a complete gang that
// does not fit is backed off as before.
func TestIncompleteGangDoesNotBackOff(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "ns", UID: "u-0"}}
	s, err := New(Config{Client: fake.NewClientset(pod), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.events.stop()
	for _, tc := range []struct {
		status  cycle.Status
		backOff bool
	}{{cycle.GangWaiting, false}, {cycle.GangMisfit, true}} {
		g := &gang{key: "ns/g-" + tc.status.String(), min: 2, pending: []*corev1.Pod{pod}}
		pp := pendingPod{pod: pod, item: item{gang: g}}
		var st CycleStats
		s.apply(context.Background(), nil, pp, cycle.Outcome{Workload: "ns/m-0", Status: tc.status, Message: "why"}, nil, &st)
		if got := s.backoff.has(gangBlockKey(g.key)); got != tc.backOff {
			t.Errorf("%v: backed off %v, want %v", tc.status, got, tc.backOff)
		}
		if st.Unschedulable != 1 {
			t.Errorf("%v: %d unschedulable counted, want 1", tc.status, st.Unschedulable)
		}
	}
}
