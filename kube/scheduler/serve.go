package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// This file translates a cycle in and applies the core's actions out: the
// pending pods become dispatch items and, when the core asks, cycle
// workloads (translate.go); the core (package dispatch) orders, backs off,
// groups gangs, reserves and runs the cycle; Binds, Evictions and Waits
// come back and are carried out here (bindings, evictions, conditions).

// cycleWork is what a cycle keeps of the pods it works out: their
// translation and, once placed, their plan (made inside the cycle's step
// by planner.Reserve, so a gang's claims are kept or given back with it).
type cycleWork struct {
	s     *Scheduler
	ctx   context.Context
	snap  *snapshot
	pods  map[string]*corev1.Pod
	work  map[string]podWork
	plans map[string]plan
	gangs map[string]dispatch.GangSpec
	dra   draclaims.Lists
}

// serve runs one scheduling cycle over the pending pods on snap through
// the core and applies what it decided, counting it in st.
func (s *Scheduler) serve(ctx context.Context, snap *snapshot, tree *queueing.Tree, pending []*corev1.Pod, gangs map[string]dispatch.GangSpec, st *CycleStats) error {
	start := time.Now()
	cw := &cycleWork{s: s, ctx: ctx, snap: snap, pods: make(map[string]*corev1.Pod, len(pending)), work: map[string]podWork{}, plans: map[string]plan{}, gangs: gangs}
	for _, p := range pending {
		cw.pods[p.Namespace+"/"+p.Name] = p
	}
	// On the core's books (snap.books): their cluster, usage, capacity and
	// running pods; what the cycle binds is assumed there until commit
	// books the pod.
	f := dispatch.Frame{Policy: s.policy, Queues: tree, Translate: cw.translate, Gang: cw.gang, Arrival: cw.arrival}
	rd, err := s.core.Cycle(start, f)
	if err != nil {
		for id := range cw.plans { // never bound: kube-scheduler's cache must not keep them
			s.filter.Unreserve(cw.pods[id].UID)
		}
		return err
	}
	st.BackingOff = rd.BackingOff
	s.nextRetry, s.lastOrder = rd.Next, rd.Order
	notes := map[string]string{}
	for _, e := range rd.Evictions {
		notes[e.For] = s.evict(ctx, snap, cw.pods[e.For], e)
	}
	for _, b := range rd.Binds {
		s.commit(ctx, snap, cw.pods[b.ID], cw.plans[b.ID])
		st.Bound++
	}
	for _, w := range rd.Waits {
		s.applyWait(ctx, cw, w, notes[w.ID], st)
	}
	s.metrics.ObserveDecisions(st.Decisions, start, rd.Tried)
	s.metrics.ObserveQueues(tree, snap.ledger(tree)) // with what it booked

	return ctx.Err()
}

// applyWait reports why a pod waits: a PodScheduled=False condition with
// the reason, and an event.
func (s *Scheduler) applyWait(ctx context.Context, cw *cycleWork, w dispatch.Wait, note string, st *CycleStats) {
	p := cw.pods[w.ID]
	if p == nil {
		return
	}
	msg, reason := w.Message, reasonUnschedulable
	switch {
	case w.Cause == dispatch.CauseUnknownQueue:
		q, from := s.members.QueueSource(p)
		msg, reason = fmt.Sprintf("%s: queue %q does not exist (create a Queue or drop the label for the default queue)", from, q), reasonInvalid
	case w.Cause == dispatch.CauseRefused:
		reason = reasonInvalid
	case w.Status == cycle.Invalid:
		reason = reasonFor(w.Err)
	case w.Status == cycle.NoFit && w.Cause == dispatch.CauseCycle:
		if pw, ok := cw.work[w.ID]; ok {
			msg = noFit(pw.reqs, pw.w.Parts, w.Outcome)
		}
	case w.Status == cycle.QueueLimit:
		reason = reasonQueueLimit
	case w.Status == cycle.GangWaiting:
		// No backoff: only a new member helps, and its arrival pokes the loop.
		s.events.Waiting(ctx, p, reasonUnschedulable, msg)
		st.Unschedulable++
		return
	}
	switch {
	case note != "":
		msg += "; " + note
	case w.AwaitingVictims:
		msg += "; waiting for preempted pods to exit"
	}
	if reason == reasonInvalid {
		st.Invalid++
	} else {
		st.Unschedulable++
	}
	s.events.Reject(ctx, p, reason, msg)
}

// evict stops the victims the core chose for pod (on node e.Node): each
// gets an event saying why and is deleted (with its UID as a
// precondition); the core has the pod wait for them before it names
// others. It returns the note to leave on the pod.
func (s *Scheduler) evict(ctx context.Context, snap *snapshot, pod *corev1.Pod, e dispatch.Eviction) string {
	node := snap.nodes[e.Node].Name
	prio := priority(pod)
	for _, v := range e.Victims {
		vp, ok := snap.pods[v.ID]
		if !ok {
			continue
		}
		at := snap.nodes[v.Node].Name
		msg := fmt.Sprintf("Preempted by %s/%s (priority %d) to free GPU shares on node %s; this pod's priority is %d", pod.Namespace, pod.Name, prio, at, priority(vp))
		if v.Kind == preemption.ByReclaim {
			msg = fmt.Sprintf("Preempted by %s/%s of queue %s, which is below its guaranteed share, to reclaim GPU shares on node %s from queue %s, which is above its own", pod.Namespace, pod.Name, s.members.Queue(pod), at, s.members.Queue(vp))
		}
		s.events.Preempted(vp, msg)
		err := s.cfg.Client.CoreV1().Pods(vp.Namespace).Delete(ctx, vp.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vp.UID}})
		if err != nil {
			s.cfg.Log.Warn("evicting a preemption victim failed", "victim", v.ID, "err", err)
		}
	}
	return fmt.Sprintf("preempting %d pod(s) on node %s; scheduling once they exit", len(e.Victims), node)
}
