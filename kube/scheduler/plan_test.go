package scheduler

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/draclaims"
)

// outcome is how planPod ended.
type outcome string

const (
	outcomeBound         outcome = "bound"
	outcomeInvalid       outcome = "invalid"
	outcomeUnschedulable outcome = "unschedulable"
	outcomeError         outcome = "error"
)

// outcomeOf is the outcome of a pod refused with err: it waits
// (draclaims.Wait), or its request is invalid, or the scheduler failed.
func outcomeOf(err error) outcome {
	switch {
	case errors.As(err, new(draclaims.Wait)):
		return outcomeUnschedulable
	case reasonFor(err) == reasonSchedulerError:
		return outcomeError
	}
	return outcomeInvalid
}

// planPod decides where pod would go on snap, as a cycle does for a pod
// served alone, without booking it or changing the API: outcomeBound with
// its plan, or why it waits.
func (s *Scheduler) planPod(snap *snapshot, pod *corev1.Pod) (plan, outcome, string) {
	pw, err := s.podWorkOf(context.Background(), snap, pod)
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
	pl, err := s.planFrom(context.TODO(), snap, pod, pw, o.Decisions, nil)
	if err != nil {
		return plan{}, outcomeOf(err), err.Error()
	}
	return pl, outcomeBound, ""
}

// bookAndCommit books a plan planPod just made on snap (deciding again:
// nothing changed since), as the cycle's step does, and commits it.
func (s *Scheduler) bookAndCommit(ctx context.Context, t *testing.T, snap *snapshot, pod *corev1.Pod, pl plan) {
	t.Helper()
	pw, err := s.podWorkOf(context.Background(), snap, pod)
	if err != nil {
		t.Fatal(err)
	}
	o, err := cycle.Plan(snap.cluster, pw.w, nil)
	if err != nil || o.Status != cycle.Placed || snap.nodes[o.Decisions[0].Node].Name != pl.assignment.Node {
		t.Fatalf("deciding %s again: %v %+v, want it placed on %s", pod.Name, err, o, pl.assignment.Node)
	}
	run := cycle.Running{Parts: pw.w.Parts, Decisions: o.Decisions}
	for i := range run.Parts {
		if err := snap.cluster.Apply(&run.Parts[i], run.Decisions[i]); err != nil {
			t.Fatalf("book %s: %v", pod.Name, err)
		}
	}
	snap.books.Assume(pod.Namespace+"/"+pod.Name, run)
	s.dra.Assume(pod, pl.claims)
	s.commit(ctx, snap, pod, pl)
}

// cycleGangs is the gangs' minimums as a cycle reads them.
func cycleGangs(specs map[string]dispatch.GangSpec) map[string]cycle.Gang {
	out := make(map[string]cycle.Gang, len(specs))
	for k, g := range specs {
		out[k] = cycle.Gang{MinMember: g.Min}
	}
	return out
}

// runningGangs gives gangs the minimum of every running member's gang, as
// the core asks the cycle's Frame.Gang for them, for tests that run
// cycle.Run directly.
func (s *Scheduler) runningGangs(snap *snapshot, gangs map[string]dispatch.GangSpec) {
	cw := &cycleWork{s: s, snap: snap, gangs: gangs}
	for g := range snap.books.Gangs() {
		if _, known := gangs[g]; !known {
			if spec := cw.gang(g); spec.Err == nil {
				gangs[g] = spec
			}
		}
	}
}
