package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// This file is the Kubernetes adapter of the scheduling cycle (package
// cycle): it translates the cycle's pods, queues, gangs, running pods and
// reservation into a cycle.Snapshot, runs the cycle once, and applies the
// outcomes (bindings, rejections with their reasons, preemption victims,
// reservations). Policy is the cycle's; this file only translates.

// pendingPod is what applying a workload's outcome needs.
type pendingPod struct {
	pod  *corev1.Pod
	work podWork
	item item
}

// serve runs one scheduling cycle over the items (in queue order) on snap
// and applies its outcomes, counting them in st.
func (s *Scheduler) serve(ctx context.Context, snap *snapshot, tree *queueing.Tree, items []item, st *CycleStats) error {
	start := time.Now()
	before := *st
	// fresh collects the bookings this cycle adds, for its ledger (and is
	// emptied every cycle, so what the snapshot's updates record does not
	// pile up).
	clear(snap.fresh)
	snap.fresh = snap.fresh[:0]
	if len(items) == 0 {
		// Nothing to place: the cycle only brought the snapshot up to date.
		s.metrics.observeCycle(before, *st, start, 0)
		s.metrics.observeQueues(tree, s.ledger(tree, snap))
		return ctx.Err()
	}
	usage := s.usage(snap)
	cs := cycle.Snapshot{Cluster: snap.cluster, Policy: s.policy, Queues: tree, Usage: usage, Capacity: snap.capacity, Gangs: map[string]cycle.Gang{}}
	pend := map[string]pendingPod{}
	for _, it := range items {
		members := it.members()
		if _, ok := tree.Queue(it.queue); !ok {
			_, from := s.queueSource(members[0])
			s.rejectAll(ctx, it, members, reasonInvalid, fmt.Sprintf("%s: queue %q does not exist (create a Queue or drop the label for the default queue)", from, it.queue), &st.Invalid)
			continue
		}
		if g := it.gang; g != nil {
			if g.err != nil {
				s.rejectAll(ctx, it, members, reasonInvalid, g.err.Error(), &st.Invalid)
				continue
			}
			cs.Gangs[g.key] = cycle.Gang{MinMember: g.min, Running: g.bound}
		}
		for _, p := range members {
			pw, err := s.podWorkOf(snap, p)
			if err != nil {
				if outcomeOf(err) == outcomeUnschedulable {
					s.reject(ctx, it.key(), p, reasonUnschedulable, err.Error())
					st.Unschedulable++
					continue
				}
				s.reject(ctx, it.key(), p, reasonInvalid, err.Error())
				st.Invalid++
				continue
			}
			w := pw.w
			// A gang is served in its first member's queue.
			w.Queue = it.queue
			if until, ok := s.preempting(p.UID); ok && start.Before(until) {
				w.AwaitingVictims = true
			}
			cs.Pending = append(cs.Pending, w)
			pw.w = w
			pend[w.ID] = pendingPod{pod: p, work: pw, item: it}
		}
	}
	cs.Running = s.running(snap, cs.Gangs)
	pods := &bookedPods{snap: snap}
	if !s.cfg.DisablePreemption {
		cs.Preemption = &cycle.Preemption{MinRuntime: s.cfg.PreemptionMinRuntime, Now: start}
	}
	cs.Reservation = s.reservation(snap, pend)
	outs, err := cycle.Run(cs)
	if err != nil {
		return fmt.Errorf("scheduling cycle: %w", err)
	}
	misfitGangs := map[string]*gang{}
	for i := 0; i < len(outs); i++ {
		o := outs[i]
		pp, ok := pend[o.Workload]
		if !ok {
			continue
		}
		if g := pp.item.gang; g != nil && o.Status == cycle.Placed {
			// A gang's placed members are consecutive: planned together,
			// committed all or none.
			members := []placedMember{{pp, o}}
			for i+1 < len(outs) {
				next, ok := pend[outs[i+1].Workload]
				if !ok || next.item.gang == nil || next.item.gang.key != g.key || outs[i+1].Status != cycle.Placed {
					break
				}
				i++
				members = append(members, placedMember{next, outs[i]})
			}
			s.applyGang(ctx, snap, members, st)
			continue
		}
		s.apply(ctx, snap, pp, o, pods, st)
		if o.Status == cycle.GangMisfit {
			misfitGangs[pp.item.gang.key] = pp.item.gang
		}
	}
	for _, g := range misfitGangs {
		need := min(max(g.min-g.bound, 0), len(g.pending))
		s.maybeReserveGang(snap, g, g.pending[:need])
	}
	s.metrics.observeCycle(before, *st, start, len(items))
	// The queues' usage after the cycle: before it, and what it booked
	// (nothing is released during a cycle).
	ledger := tree.NewLedger(snap.capacity, usage)
	for _, b := range snap.fresh {
		ledger.Charge(s.queueOf(b.pod), bookedResources(b))
	}
	s.metrics.observeQueues(tree, ledger)
	return ctx.Err()
}

// members are an item's pods: its pod, or its gang's pending members.
func (it item) members() []*corev1.Pod {
	if it.gang != nil {
		return it.gang.pending
	}
	return []*corev1.Pod{it.pod}
}

// rejectAll rejects every member of an item for one reason, counting them.
func (s *Scheduler) rejectAll(ctx context.Context, it item, members []*corev1.Pod, reason, msg string, count *int) {
	for _, p := range members {
		s.reject(ctx, it.key(), p, reason, msg)
		*count++
	}
}

// placedMember is a gang member the cycle placed, with its outcome.
type placedMember struct {
	pp pendingPod
	o  cycle.Outcome
}

// applyGang commits a gang's placed members all or none: each is planned
// first (its claims allocated, assumed so that the next members see them);
// when one cannot be (the allocator refuses a claim on the GPUs the
// policy chose), every plan is given back, every member's room released,
// and each is left pending saying which member failed and why.
func (s *Scheduler) applyGang(ctx context.Context, snap *snapshot, members []placedMember, st *CycleStats) {
	g := members[0].pp.item.gang
	plans := make([]plan, 0, len(members))
	for _, m := range members {
		pl, oc, msg := s.planFrom(ctx, snap, m.pp.pod, m.pp.work, m.o.Decisions)
		if oc == outcomeBound {
			s.assumeClaims(m.pp.pod, pl.claims)
			plans = append(plans, pl)
			continue
		}
		for i, done := range plans {
			s.forgetClaims(members[i].pp.pod, done.claims)
		}
		for _, r := range members {
			s.releasePlaced(snap, r.pp, r.o)
		}
		why := fmt.Sprintf("gang %s: member %s/%s cannot be bound (%s), so none is (all or nothing)", g.key, m.pp.pod.Namespace, m.pp.pod.Name, msg)
		for _, r := range members {
			s.reject(ctx, r.pp.item.key(), r.pp.pod, reasonFor(oc), why)
			st.count(oc)
		}
		return
	}
	s.unblockKey(gangBlockKey(g.key))
	for i, m := range members {
		st.count(s.commit(ctx, snap, m.pp.pod, plans[i], m.pp.item.key(), true))
	}
}

// releasePlaced gives back on snap the room the cycle booked for a pod
// that is not committed after all.
func (s *Scheduler) releasePlaced(snap *snapshot, pp pendingPod, o cycle.Outcome) {
	for i, d := range o.Decisions {
		if err := snap.cluster.Release(&pp.work.w.Parts[i], d); err != nil {
			s.cfg.Log.Error("releasing an unrecorded placement failed", "pod", o.Workload, "err", err)
		}
	}
}

// apply carries out one workload's outcome.
func (s *Scheduler) apply(ctx context.Context, snap *snapshot, pp pendingPod, o cycle.Outcome, pods *bookedPods, st *CycleStats) {
	p, key := pp.pod, pp.item.key()
	switch o.Status {
	case cycle.Placed:
		pl, oc, msg := s.planFrom(ctx, snap, p, pp.work, o.Decisions)
		if oc != outcomeBound {
			// The assignment cannot be recorded: give the room back.
			s.releasePlaced(snap, pp, o)
			s.reject(ctx, key, p, reasonFor(oc), msg)
			st.count(oc)
			return
		}
		if pp.item.gang != nil {
			s.unblockKey(gangBlockKey(pp.item.gang.key))
		} else {
			s.unblock(p)
		}
		st.count(s.commit(ctx, snap, p, pl, key, true))
	case cycle.NoFit:
		msg := noFit(pp.work.reqs, pp.work.w.Parts, o)
		switch {
		case len(o.Victims) > 0:
			msg += "; " + s.evict(ctx, snap, p, o, pods)
		case s.awaitingVictims(p):
			msg += "; waiting for preempted pods to exit"
		}
		if pp.item.gang == nil {
			s.maybeReserve(snap, p)
		}
		s.reject(ctx, key, p, reasonUnschedulable, msg)
		st.Unschedulable++
	case cycle.QueueLimit:
		s.reject(ctx, key, p, reasonQueueLimit, o.Message)
		st.Unschedulable++
	case cycle.GangMisfit:
		msg := o.Message
		if g := pp.item.gang; g.timeout > 0 {
			if waited := g.waited(); waited > g.timeout {
				msg = fmt.Sprintf("gang %s timed out: it has not fitted for %s, over its scheduleTimeoutSeconds (%s); ", g.key, waited.Round(time.Second), g.timeout) + msg
			}
		}
		if len(o.Victims) > 0 { // on the first member's outcome: stopped for the whole gang
			msg += "; " + s.evict(ctx, snap, p, o, pods)
		}
		s.reject(ctx, key, p, reasonUnschedulable, msg)
		st.Unschedulable++
	case cycle.Invalid:
		s.unblock(p)
		s.reject(ctx, key, p, reasonInvalid, o.Message)
		st.Invalid++
	default: // GangWaiting; Behind does not occur (not Strict)
		// No backoff: only a new member helps, and its arrival pokes the
		// loop. A backoff recorded after a member arrived during this cycle
		// would hold the now complete gang back for up to the longest wait.
		s.events.waiting(ctx, p, reasonUnschedulable, o.Message)
		st.Unschedulable++
	}
}

// awaitingVictims reports whether a pod waits for victims it chose.
func (s *Scheduler) awaitingVictims(p *corev1.Pod) bool {
	until, ok := s.preempting(p.UID)
	return ok && time.Now().Before(until)
}

// running is every pod booked on snap as a cycle.Running (the candidates
// of preemption are this scheduler's exactly booked, live pods; the others
// are Stopping: they count, but are never victims), and gangs gains the
// minimum of every running member's gang. Each booking's is worked out
// once per pod object (runOf).
func (s *Scheduler) running(snap *snapshot, gangs map[string]cycle.Gang) []cycle.Running {
	n := 0
	for _, bs := range snap.onNode {
		n += len(bs)
	}
	out := make([]cycle.Running, 0, n)
	var own map[types.UID][]*claimHold // claims only one pod holds, by pod
	for i := range snap.claimHolds {
		if h := &snap.claimHolds[i]; len(h.pods) == 1 && h.exact && len(h.parts) > 0 {
			if own == nil {
				own = map[types.UID][]*claimHold{}
			}
			own[h.pods[0]] = append(own[h.pods[0]], h)
		}
	}
	for ni := range snap.onNode {
		for k := range snap.onNode[ni] {
			r := s.runOf(&snap.onNode[ni][k])
			if _, known := gangs[r.run.Gang]; r.run.Gang != "" && !known {
				if n, err := s.minMember(r.pod); err == nil {
					gangs[r.run.Gang] = cycle.Gang{MinMember: n}
				}
			}
			run := r.run
			if hs := own[r.pod.UID]; len(hs) > 0 {
				// The pod's claims go with it: a copy, the booking's run
				// is kept as it is.
				run.Parts, run.Decisions = slices.Clone(run.Parts), slices.Clone(run.Decisions)
				for _, h := range hs {
					run.Parts, run.Decisions = append(run.Parts, h.parts...), append(run.Decisions, h.decisions...)
				}
			}
			out = append(out, run)
		}
	}
	return out
}

// bookedRun is what a cycle reads of a booking: the pod as a running
// workload, its queue and what it takes from it. A booking keeps it
// (booking.run) for as long as it books the same pod object: an update of
// the pod gives the booking a new object, and so a new bookedRun.
type bookedRun struct {
	pod   *corev1.Pod // the object it was read from
	exact bool
	run   cycle.Running
	use   queueing.Resources
	// volatile: the queue was read from a Volcano PodGroup, or the gang
	// from a Job, which may change without the pod: read again each time.
	volatile bool
}

// runOf returns b's bookedRun, working it out when b has none for its pod.
func (s *Scheduler) runOf(b *booking) *bookedRun {
	if r := b.run; r != nil && r.pod == b.pod && r.exact == b.exact {
		if r.volatile {
			r.run.Queue, r.run.Gang = s.queueOf(b.pod), s.groupKey(b.pod)
		}
		return r
	}
	p := b.pod
	r := &bookedRun{pod: p, exact: b.exact, use: bookedResources(*b), volatile: queueFromGroup(p) || gangFromJob(p),
		run: cycle.Running{
			ID: p.Namespace + "/" + p.Name, Queue: s.queueOf(p), Priority: priority(p), Gang: s.groupKey(p),
			Stopping: !b.exact || p.Spec.SchedulerName != s.cfg.Name || p.DeletionTimestamp != nil,
		}}
	if p.Status.StartTime != nil {
		r.run.Started = p.Status.StartTime.Time
	}
	r.run.Parts = make([]placement.Pod, len(b.parts))
	r.run.Decisions = make([]placement.Decision, len(b.parts))
	for i, part := range b.parts {
		r.run.Parts[i], r.run.Decisions[i] = part.pod, part.dec
	}
	b.run = r
	return r
}

// bookedPods finds a booked pod by its workload ID (namespace/name); the
// index is made on first use (only preemption needs it).
type bookedPods struct {
	snap *snapshot
	byID map[string]*corev1.Pod
}

func (bp *bookedPods) get(id string) (*corev1.Pod, bool) {
	if bp.byID == nil {
		bp.byID = map[string]*corev1.Pod{}
		for _, bs := range bp.snap.onNode {
			for _, b := range bs {
				bp.byID[b.pod.Namespace+"/"+b.pod.Name] = b.pod
			}
		}
	}
	p, ok := bp.byID[id]
	return p, ok
}

// usage is what the pods booked on snap take from their queues, with
// the allocated DRA claims they hold (each once: claimHold).
func (s *Scheduler) usage(snap *snapshot) map[string]queueing.Resources {
	own := map[string]queueing.Resources{}
	var queueOf map[types.UID]string
	if len(snap.claimHolds) > 0 {
		queueOf = map[types.UID]string{}
	}
	for ni := range snap.onNode {
		for k := range snap.onNode[ni] {
			b := &snap.onNode[ni][k]
			r := s.runOf(b)
			own[r.run.Queue] = own[r.run.Queue].Add(r.use)
			if queueOf != nil {
				queueOf[b.pod.UID] = r.run.Queue
			}
		}
	}
	for _, h := range snap.claimHolds {
		for _, uid := range h.pods {
			if q, ok := queueOf[uid]; ok {
				own[q] = own[q].Add(h.use)
				break
			}
		}
	}
	return own
}

// reservation is the reservation in force as the cycle's: its nodes by
// index in snap, the pods it holds room for, and the pending workloads that
// may use it. nil when there is none or it cannot be translated.
func (s *Scheduler) reservation(snap *snapshot, pend map[string]pendingPod) *cycle.Reservation {
	s.mu.Lock()
	r := s.reserved
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	held, err := s.workloadsOf(snap, r.pods)
	if err != nil {
		return nil
	}
	res := &cycle.Reservation{What: r.what, Nodes: map[int]bool{}, For: held, Members: map[string]bool{}}
	for name := range r.nodes {
		if i, ok := snap.byName[name]; ok {
			res.Nodes[i] = true
		}
	}
	for id, pp := range pend {
		if r.holds(pp.pod) {
			res.Members[id] = true
		}
	}
	for _, w := range held {
		res.Members[w.ID] = true
	}
	return res
}

// evict stops the victims the cycle chose for pod (o.Victims, on node
// o.Node): each gets an event saying why and is deleted (with its UID as a
// precondition), and the pod waits for them (preemptionWait) before it
// names others. It returns the note to leave on the pod.
func (s *Scheduler) evict(ctx context.Context, snap *snapshot, pod *corev1.Pod, o cycle.Outcome, pods *bookedPods) string {
	node := snap.nodes[o.Node].Name
	prio := priority(pod)
	for _, v := range o.Victims {
		vp, ok := pods.get(v.ID)
		if !ok {
			continue
		}
		at := snap.nodes[v.Node].Name
		msg := fmt.Sprintf("Preempted by %s/%s (priority %d) to free GPU shares on node %s; this pod's priority is %d", pod.Namespace, pod.Name, prio, at, priority(vp))
		if v.Kind == preemption.ByReclaim {
			msg = fmt.Sprintf("Preempted by %s/%s of queue %s, which is below its guaranteed share, to reclaim GPU shares on node %s from queue %s, which is above its own", pod.Namespace, pod.Name, s.queueOf(pod), at, s.queueOf(vp))
		}
		s.events.recorder.Event(vp, corev1.EventTypeWarning, "Preempted", msg)
		err := s.cfg.Client.CoreV1().Pods(vp.Namespace).Delete(ctx, vp.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vp.UID}})
		if err != nil {
			s.cfg.Log.Warn("evicting a preemption victim failed", "victim", v.ID, "err", err)
		}
	}
	s.setPreempting(pod.UID, time.Now().Add(preemptionWait))
	return fmt.Sprintf("preempting %d pod(s) on node %s; scheduling once they exit", len(o.Victims), node)
}
