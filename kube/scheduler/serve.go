package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/kube/podbind"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// This file carries out what a cycle decides: serve gives the core
// (package dispatch) its frame (pending pods translated when it asks:
// translate.go), the pods' Reserver (planner) makes each placed pod's plan
// inside the cycle's step, and the core's Binds, Evictions and Waits are
// carried out (commit hands bindings to kube/podbind; evictions;
// conditions and events).

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
	start, now := time.Now(), s.now() // the metrics' time, the core's
	cw := &cycleWork{s: s, ctx: ctx, snap: snap, pods: make(map[string]*corev1.Pod, len(pending)), work: map[string]podWork{}, plans: map[string]plan{}, gangs: gangs}
	for _, p := range pending {
		cw.pods[p.Namespace+"/"+p.Name] = p
	}
	// On the core's books (snap.books): their cluster, usage, capacity and
	// running pods; what the cycle binds is assumed there until commit
	// books the pod.
	f := dispatch.Frame{Policy: s.policy, Queues: tree, Translate: cw.translate, Gang: cw.gang, Arrival: cw.arrival,
		IdleSince: s.idleMarks(tree, now)}
	rd, err := s.core.Cycle(now, f)
	if err != nil {
		for id, pn := range cw.plans { // never bound: neither their claims nor kube-scheduler's cache keep them
			s.dra.Forget(cw.pods[id], pn.claims)
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
		switch v.Kind {
		case preemption.ByReclaim:
			msg = fmt.Sprintf("Preempted by %s/%s of queue %s, which is below its guaranteed share, to reclaim GPU shares on node %s from queue %s, which is above its own", pod.Namespace, pod.Name, s.members.Queue(pod), at, s.members.Queue(vp))
		case preemption.ByIdle:
			msg = fmt.Sprintf("Stopped for %s/%s to free GPU shares on node %s: this pod held its GPUs idle longer than its queue %s reclaims idle holders after (spec.idleReclaimAfter)", pod.Namespace, pod.Name, at, s.members.Queue(vp))
		}
		s.events.Preempted(vp, msg)
		err := s.cfg.Client.CoreV1().Pods(vp.Namespace).Delete(ctx, vp.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vp.UID}})
		if err != nil {
			s.cfg.Log.Warn("evicting a preemption victim failed", "victim", v.ID, "err", err)
		}
	}
	return fmt.Sprintf("preempting %d pod(s) on node %s; scheduling once they exit", len(e.Victims), node)
}

// schedulerError is a plan the scheduler failed to make (not the pod's
// fault): its reason is SchedulerError, not InvalidGPURequest.
type schedulerError struct{ err error }

func (e schedulerError) Error() string { return e.err.Error() }
func (e schedulerError) Unwrap() error { return e.err }

// reasonFor is the PodScheduled reason of a pod refused with err: its own
// request or claim is invalid, or the scheduler failed.
func reasonFor(err error) string {
	var se schedulerError
	if errors.As(err, &se) {
		return reasonSchedulerError
	}
	return reasonInvalid
}

// planner makes a placed pod's plan inside the cycle's step: its
// assignment (shares per GPU container) and the allocation of its DRA
// claims, assumed at once so the next pods see them, and the pod assumed
// in kube-scheduler's cache, after its plugins pass it on its node with
// the earlier picks counted when they concern it (kube/kubefilter);
// Unreserve gives them back when the step is discarded (a gang that does
// not fit whole).
type planner cycleWork

func (pl *planner) Reserve(w *cycle.Workload, decisions []placement.Decision) (string, error) {
	cw := (*cycleWork)(pl)
	p, pw := cw.pods[w.ID], cw.work[w.ID]
	pn, err := cw.s.planFrom(cw.ctx, cw.snap, p, pw, decisions, &cw.dra)
	if errors.As(err, new(draclaims.Wait)) {
		return err.Error(), nil // the claims cannot be allocated on this node
	} else if err != nil {
		return "", err
	}
	if why, err := cw.s.filter.Reserve(cw.ctx, p, pn.assignment.Node, pw.filtered); err != nil {
		return "", schedulerError{err}
	} else if why != "" {
		return why, nil
	}
	cw.s.dra.Assume(p, pn.claims)
	cw.plans[w.ID] = pn
	return "", nil
}

// FitsWithout is the plugins' preemption dry run (cycle.VictimChecker)
// for a pod they concern: whether it passes them on the node once the
// victims (booked pods, by workload ID) are gone. A pod they do not
// concern needs only the room the engine counts.
func (pl *planner) FitsWithout(w *cycle.Workload, node int, victims []string) (string, error) {
	cw := (*cycleWork)(pl)
	if !cw.work[w.ID].filtered {
		return "", nil
	}
	uids := make([]types.UID, 0, len(victims))
	for _, id := range victims {
		if p := cw.snap.pods[id]; p != nil {
			uids = append(uids, p.UID)
		}
	}
	why, err := cw.s.filter.FitsWithout(cw.ctx, cw.pods[w.ID], cw.snap.nodes[node].Name, uids)
	if err != nil {
		return "", schedulerError{err}
	}
	return why, nil
}

func (pl *planner) Unreserve(w *cycle.Workload, _ []placement.Decision) {
	cw := (*cycleWork)(pl)
	cw.s.filter.Unreserve(cw.pods[w.ID].UID)
	if pn, ok := cw.plans[w.ID]; ok {
		cw.s.dra.Forget(cw.pods[w.ID], pn.claims)
		delete(cw.plans, w.ID)
	}
}

// planFrom turns the cycle's decisions for a pod's parts (pw; nodes
// indexed in snap) into its plan: the assignment with each GPU container's
// shares, encoded for its annotation, and the allocation of its claims
// (from lists: the cycle's, or nil to list them now). A draclaims.Wait
// error says the claims cannot be allocated on that node; any other
// refuses the pod (reasonFor).
func (s *Scheduler) planFrom(ctx context.Context, snap *snapshot, pod *corev1.Pod, pw podWork, decisions []placement.Decision, lists *draclaims.Lists) (plan, error) {
	reqs, parts := pw.reqs, pw.w.Parts
	pl := plan{assignment: binding.Assignment{Version: binding.Version, Node: snap.nodes[decisions[0].Node].Name}}
	for i, d := range decisions {
		if r := reqs[i]; r.Container != "" {
			pl.assignment.Containers = append(pl.assignment.Containers, binding.Container{Name: r.Container, GPUs: s.shares(snap, d.Node, d, r.GPU)})
		}
	}
	if len(pl.assignment.Containers) > 0 {
		// Encoded here, not at bind time, so that a record that cannot be
		// written fails the plan (and a gang's plan) before anything binds.
		var err error
		if pl.encoded, err = binding.Encode(pl.assignment); err != nil {
			return plan{}, schedulerError{fmt.Errorf("annotation %s: %w", binding.AnnotationKey, err)}
		}
	}
	if pw.claims != nil {
		// The claims are allocated on the devices of the shares the
		// policy's decisions for their parts give, on the pod's node.
		ni := decisions[0].Node
		shares := func(j int) []binding.Share { return s.shares(snap, ni, decisions[j], parts[j].GPU) }
		var err error
		if pl.claims, _, err = s.dra.Allocate(ctx, snap.nodes[ni], snap.inv(ni), pw.claims, shares, lists); err != nil {
			err = fmt.Errorf("pod %s/%s: DRA claims: %w", pod.Namespace, pod.Name, err)
			var wait draclaims.Wait
			var invalid draclaims.Invalid
			if !errors.As(err, &wait) && !errors.As(err, &invalid) {
				err = schedulerError{err}
			}
			return plan{}, err
		}
	}
	return pl, nil
}

// plan is a decision for one pod, as its binding carries it out.
type plan struct {
	assignment binding.Assignment
	// encoded is the assignment annotation; "" for a pod granted no GPU,
	// which carries none (it asks nothing of the node agent).
	encoded string
	// claims are the DRA claims the binding writes first.
	claims []draclaims.Write
}

// commit records a placed pod's booking (the cycle booked it) on snap,
// assumes it (so later cycles count it until the informer shows it bound)
// and hands its binding to the binder. How the binding ends reaches the
// core through the inbox: a failed one un-assumes the pod and backs it
// off (after reporting why on it), unless the pod turns out bound after
// all (podbind.Settle).
func (s *Scheduler) commit(ctx context.Context, snap *snapshot, pod *corev1.Pod, pl plan) {
	a := pl.assignment
	bound := pod.DeepCopy()
	bound.Spec.NodeName = a.Node
	if pl.encoded != "" {
		if bound.Annotations == nil {
			bound.Annotations = map[string]string{}
		}
		bound.Annotations[binding.AnnotationKey] = pl.encoded
	}
	s.bookPod(snap, bound)
	s.assumed[pod.Namespace+"/"+pod.Name] = bound
	id := pod.Namespace + "/" + pod.Name
	job := func(ctx context.Context) {
		defer wakeUp(s.wake)
		// A PodScheduled=False decided by an earlier cycle must not land
		// after the binding.
		s.events.Settle(ctx, pod.UID)
		written := func(w draclaims.Written) { s.inbox.claimsDone(claimReport{written: w}) }
		if err := s.dra.Write(ctx, pod, pl.claims, written); err != nil {
			s.dra.Undo(ctx, pod, pl.claims)
			s.inbox.claimsDone(claimReport{forget: true, pod: pod, ws: pl.claims})
			s.bindFailed(ctx, id, pod, err)
			return
		}
		// The pod's volumes first (kube-scheduler's PreBind): bound to
		// the volumes its check chose, or provisioned for its node.
		if err := s.filter.PreBind(ctx, pod.UID); err != nil {
			s.dra.Undo(ctx, pod, pl.claims)
			s.inbox.claimsDone(claimReport{forget: true, pod: pod, ws: pl.claims})
			s.bindFailed(ctx, id, pod, err)
			return
		}
		if err := podbind.Bind(ctx, s.cfg.Client, pod, a.Node, pl.encoded); err != nil {
			if cur, ok := podbind.Settle(ctx, s.cfg.Client, s.cfg.Log, pod, err); ok {
				s.inbox.bindEnded(bindReport{id: id, uid: pod.UID, ok: true, bound: cur})
				return
			}
			s.dra.Undo(ctx, pod, pl.claims)
			s.inbox.claimsDone(claimReport{forget: true, pod: pod, ws: pl.claims})
			s.bindFailed(ctx, id, pod, err)
			return
		}
		s.metrics.Bound()
		s.inbox.bindEnded(bindReport{id: id, uid: pod.UID, ok: true})
		s.events.Bound(ctx, pod, a.Node, a)
	}
	switch {
	case s.binder == nil:
		job(ctx)
	case s.filter.PreBinds(pod.UID):
		// Waiting for a volume to be provisioned can take minutes: not
		// on a worker the quick bindings share.
		s.binder.Go(job)
	default:
		s.binder.Submit(job)
	}
}

// bindFailed returns a pod whose binding failed to the queue: it is backed
// off (before it is un-assumed, so no cycle in between retries it at once)
// and, unless it is gone or was bound by someone else, gets a
// PodScheduled=False condition and an event saying why.
func (s *Scheduler) bindFailed(ctx context.Context, id string, pod *corev1.Pod, err error) {
	s.metrics.BindFailed()
	s.inbox.bindEnded(bindReport{id: id, uid: pod.UID, err: err})
	if ctx.Err() != nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Shutting down, deleted, or bound meanwhile: nothing to report on it.
		s.cfg.Log.Debug("binding failed", "pod", id, "err", err)
		return
	}
	s.events.Reject(ctx, pod, reasonSchedulerError, err.Error())
}

// Reasons on events and on the PodScheduled condition.
const (
	reasonInvalid       = "InvalidGPURequest"
	reasonUnschedulable = corev1.PodReasonUnschedulable
	// reasonSchedulerError: the decision was made but could not be carried
	// out (the API refused the binding); kube-scheduler's reason too.
	reasonSchedulerError = corev1.PodReasonSchedulerError
	// reasonQueueLimit: the pod's queue is at its limit.
	reasonQueueLimit = "QueueLimit"
)

// shares is placement.Shares on the snapshot's node ni. A decision that
// does not match the snapshot (which it was made on) is logged and gives
// no shares.
func (s *Scheduler) shares(snap *snapshot, ni int, d placement.Decision, r request.GPU) []binding.Share {
	out, err := placement.Shares(&snap.cluster.Nodes[ni], snap.inv(ni), r, d, s.cfg.Catalog)
	if err != nil {
		s.cfg.Log.Error("decision does not match its snapshot; no shares", "err", err)
		return nil
	}
	return out
}

// noFit says why a pod (its parts' requests reqs) fits on no node: what its
// first part asks and the nodes' rejections, counted per reason.
func noFit(reqs []workload.ContainerRequest, parts []placement.Pod, o cycle.Outcome) string {
	return fmt.Sprintf("no node fits %s for %s: %s", describe(reqs[0].GPU), parts[0].Name, cycle.Summarize(o.Rejections))
}

func describe(r request.GPU) string {
	if r.Count == 0 {
		return "the pod's CPU and memory"
	}
	return fmt.Sprintf("%d GPU(s) at compute %d/%d", r.Count, r.ComputeMilli, request.Whole)
}
