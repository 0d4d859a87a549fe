package scheduler

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
)

// planPod decides where pod would go on snap, as a cycle does for a pod
// served alone, without booking it or changing the API: outcomeBound with
// its plan, or why it waits.
func (s *Scheduler) planPod(snap *snapshot, pod *corev1.Pod) (plan, outcome, string) {
	pw, err := s.podWorkOf(snap, pod)
	if err != nil {
		return plan{}, outcomeOf(err), err.Error()
	}
	o, err := cycle.Plan(snap.cluster, pw.w, nil)
	if err != nil {
		return plan{}, outcomeError, err.Error()
	}
	switch o.Status {
	case cycle.Placed:
	case cycle.Invalid:
		return plan{}, outcomeInvalid, o.Message
	default:
		return plan{}, outcomeUnschedulable, noFit(pw.reqs, pw.w.Parts, o)
	}
	return s.planFrom(context.TODO(), snap, pod, pw, o.Decisions, nil)
}

// bookAndCommit books a plan on snap, as the cycle's step does, and
// commits it.
func (s *Scheduler) bookAndCommit(ctx context.Context, t *testing.T, snap *snapshot, pod *corev1.Pod, pl plan) {
	t.Helper()
	var run cycle.Running
	for _, d := range pl.placed {
		if err := snap.cluster.Apply(&d.pod, d.dec); err != nil {
			t.Fatalf("book %s: %v", pod.Name, err)
		}
		run.Parts, run.Decisions = append(run.Parts, d.pod), append(run.Decisions, d.dec)
	}
	snap.books.Assume(pod.Namespace+"/"+pod.Name, run)
	s.dra.Assume(pod, pl.claims)
	if o := s.commit(ctx, snap, pod, pl); o != outcomeBound {
		t.Fatalf("commit %s: %v", pod.Name, o)
	}
}

// cycleGangs is the gangs' minimums as a cycle reads them.
func cycleGangs(specs map[string]dispatch.GangSpec) map[string]cycle.Gang {
	out := make(map[string]cycle.Gang, len(specs))
	for k, g := range specs {
		out[k] = cycle.Gang{MinMember: g.Min}
	}
	return out
}
