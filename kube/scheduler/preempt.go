package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
)

// preemptionWait bounds how long a preemptor waits for its victims to exit
// before it may choose victims again.
const preemptionWait = 2 * time.Minute

// preempt tries to make room for an unschedulable pod by evicting pods from
// one node, by the rules of package preemption: lower-priority pods of its
// queue, or (with fair set) pods of queues above their guarantee when the
// pod's queue is below its own (reclaim); never one that has run less than
// the minimum runtime, never so many members of a gang that it falls below
// its minimum; the node needing the fewest victims wins. Only this scheduler's
// pods are victims. It returns the message to leave on the pod, or "" when
// no preemption helps.
func (s *Scheduler) preempt(ctx context.Context, snap *snapshot, pod *corev1.Pod, fair *fairness) string {
	if until, ok := s.preempting(pod.UID); ok && time.Now().Before(until) {
		return "waiting for preempted pods to exit"
	}
	prio := priority(pod)
	w := preemption.Waiting{Queue: s.queueOf(pod), Priority: prio, Need: s.estimate(pod)}
	rules := preemption.Rules{MinRuntime: s.cfg.PreemptionMinRuntime, Fair: fair}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	surplus := s.gangSurplus(snap)
	var best *preemption.Plan
	var victims []*corev1.Pod
	for ni, n := range snap.nodes {
		if eligible(pod, aff, n) != "" {
			continue
		}
		vp, pods, ok := s.victimsOn(snap, ni, pod, w, rules, surplus)
		if !ok {
			continue
		}
		if best == nil || preemption.Better(vp, *best) {
			best, victims = &vp, pods
		}
	}
	if best == nil {
		return ""
	}
	node := snap.nodes[best.Node].Name
	now := time.Now()
	for i, v := range victims {
		msg := fmt.Sprintf("Preempted by %s/%s (priority %d) to free GPU shares on node %s; this pod's priority is %d", pod.Namespace, pod.Name, prio, node, priority(v))
		if rules.Why(w, best.Victims[i], now) == preemption.ByReclaim {
			msg = fmt.Sprintf("Preempted by %s/%s of queue %s, which is below its guaranteed share, to reclaim GPU shares on node %s from queue %s, which is above its own", pod.Namespace, pod.Name, s.queueOf(pod), node, s.queueOf(v))
		}
		s.events.recorder.Event(v, corev1.EventTypeWarning, "Preempted", msg)
		err := s.cfg.Client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
		if err != nil {
			s.cfg.Log.Warn("evicting a preemption victim failed", "victim", v.Namespace+"/"+v.Name, "err", err)
		}
	}
	s.setPreempting(pod.UID, time.Now().Add(preemptionWait))
	return fmt.Sprintf("preempting %d pod(s) on node %s; scheduling once they exit", len(victims), node)
}

// victimsOn finds the victims on node ni whose eviction lets the pod fit
// there: this scheduler's exactly booked, live pods become candidates,
// package preemption picks and orders them, and each is released from a
// one-node copy until the pod fits.
func (s *Scheduler) victimsOn(snap *snapshot, ni int, pod *corev1.Pod, w preemption.Waiting, rules preemption.Rules, surplus map[string]int) (preemption.Plan, []*corev1.Pod, bool) {
	byID := map[string]booking{}
	var cands []preemption.Candidate
	for _, b := range snap.onNode[ni] {
		v := b.pod
		if !b.exact || v.Spec.SchedulerName != s.cfg.Name || v.DeletionTimestamp != nil {
			continue
		}
		c := preemption.Candidate{ID: v.Namespace + "/" + v.Name, Queue: s.queueOf(v), Priority: priority(v), Group: s.groupKey(v)}
		if v.Status.StartTime != nil {
			c.Started = v.Status.StartTime.Time
		}
		byID[c.ID] = b
		cands = append(cands, c)
	}
	eligibleCands := rules.Eligible(w, cands, time.Now())
	if len(eligibleCands) == 0 {
		return preemption.Plan{}, nil, false
	}
	one := &snapshot{
		cluster: (&placement.Cluster{Nodes: []placement.Node{snap.cluster.Nodes[ni]}}).Clone(),
		nodes:   []*corev1.Node{snap.nodes[ni]}, inv: []inventory.Node{snap.inv[ni]},
		byName: map[string]int{snap.nodes[ni].Name: 0}, uuidPos: []map[string]int{snap.uuidPos[ni]},
		onNode: make([][]booking, 1),
	}
	release := func(c preemption.Candidate) error {
		for _, part := range byID[c.ID].parts {
			d := part.dec
			d.Node = 0
			if err := one.cluster.Release(&part.pod, d); err != nil {
				return fmt.Errorf("release %s: %w", c.ID, err)
			}
		}
		return nil
	}
	fits := func() bool {
		_, o, _ := s.plan(one, pod)
		return o == outcomeBound
	}
	victims, ok := preemption.Victims(eligibleCands, surplus, release, fits)
	if !ok {
		return preemption.Plan{}, nil, false
	}
	pods := make([]*corev1.Pod, len(victims))
	for i, v := range victims {
		pods[i] = byID[v.ID].pod
	}
	return preemption.Plan{Node: ni, Victims: victims}, pods, true
}

// gangSurplus is, per gang, how many bound members exceed its minimum.
func (s *Scheduler) gangSurplus(snap *snapshot) map[string]int {
	var members []preemption.Member
	for _, bs := range snap.onNode {
		for _, b := range bs {
			if k := s.groupKey(b.pod); k != "" {
				m := preemption.Member{Group: k, Min: -1}
				if n, err := s.minMember(b.pod); err == nil {
					m.Min = n
				}
				members = append(members, m)
			}
		}
	}
	return preemption.Surplus(members)
}

// ranLongEnough reports whether a pod has run the minimum runtime; a pod
// that has not started yet has not.
func (s *Scheduler) ranLongEnough(p *corev1.Pod) bool {
	var started time.Time
	if p.Status.StartTime != nil {
		started = p.Status.StartTime.Time
	}
	return preemption.Rules{MinRuntime: s.cfg.PreemptionMinRuntime}.RanLongEnough(started, time.Now())
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func (s *Scheduler) preempting(uid types.UID) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.preemptors[uid]
	return t, ok
}

func (s *Scheduler) setPreempting(uid types.UID, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.preemptors[uid] = until
}

// gcPreemptors forgets preemptors that are gone or already placed.
func (s *Scheduler) gcPreemptors(seen map[types.UID]bool, occupying []*corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range occupying {
		delete(s.preemptors, p.UID)
	}
	for uid := range s.preemptors {
		if !seen[uid] {
			delete(s.preemptors, uid)
		}
	}
}
