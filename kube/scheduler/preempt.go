package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
)

// preemptionWait bounds how long a preemptor waits for its victims to exit
// before it may choose victims again.
const preemptionWait = 2 * time.Minute

// victimPlan is the pods to evict from one node so a pod fits there.
type victimPlan struct {
	node    int
	victims []*corev1.Pod
	maxPrio int32
}

// preempt tries to make room for an unschedulable pod by evicting pods of
// lower priority from one node: the node needing the fewest victims (then
// the lowest highest-victim priority). Only this scheduler's pods are
// victims, never one that has run less than the minimum runtime, and never
// so many members of a gang that it falls below its minimum. It returns the
// message to leave on the pod, or "" when no preemption helps.
//
// With fair set, a pod whose queue is below its guarantee may also evict
// pods of any priority from queues above theirs (reclaim).
func (s *Scheduler) preempt(ctx context.Context, snap *snapshot, pod *corev1.Pod, fair *fairness) string {
	if until, ok := s.preempting(pod.UID); ok && time.Now().Before(until) {
		return "waiting for preempted pods to exit"
	}
	prio := priority(pod)
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	surplus := s.gangSurplus(snap)
	var best *victimPlan
	for ni, n := range snap.nodes {
		if eligible(pod, aff, n) != "" {
			continue
		}
		vp, ok := s.victimsOn(snap, ni, pod, prio, surplus, fair)
		if !ok {
			continue
		}
		if best == nil || len(vp.victims) < len(best.victims) || (len(vp.victims) == len(best.victims) && vp.maxPrio < best.maxPrio) {
			best = &vp
		}
	}
	if best == nil {
		return ""
	}
	node := snap.nodes[best.node].Name
	for _, v := range best.victims {
		msg := fmt.Sprintf("Preempted by %s/%s (priority %d) to free GPU shares on node %s; this pod's priority is %d", pod.Namespace, pod.Name, prio, node, priority(v))
		if priority(v) >= prio {
			msg = fmt.Sprintf("Preempted by %s/%s of queue %s, which is below its guaranteed share, to reclaim GPU shares on node %s from queue %s, which is above its own", pod.Namespace, pod.Name, queueOf(pod), node, queueOf(v))
		}
		s.events.recorder.Event(v, corev1.EventTypeWarning, "Preempted", msg)
		err := s.cfg.Client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
		if err != nil {
			s.cfg.Log.Warn("evicting a preemption victim failed", "victim", v.Namespace+"/"+v.Name, "err", err)
		}
	}
	s.setPreempting(pod.UID, time.Now().Add(preemptionWait))
	return fmt.Sprintf("preempting %d lower-priority pod(s) on node %s; scheduling once they exit", len(best.victims), node)
}

// victimsOn finds the fewest victims on node ni, lowest priority and
// newest first, whose eviction lets the pod fit there.
func (s *Scheduler) victimsOn(snap *snapshot, ni int, pod *corev1.Pod, prio int32, surplus map[string]int, fair *fairness) (victimPlan, bool) {
	var cands []booking
	need := s.estimate(pod)
	for _, b := range snap.onNode[ni] {
		v := b.pod
		if !b.exact || v.Spec.SchedulerName != s.cfg.Name || v.DeletionTimestamp != nil || !s.ranLongEnough(v) {
			continue
		}
		if priority(v) >= prio && !fair.mayReclaim(queueOf(pod), need, v) {
			continue
		}
		cands = append(cands, b)
	}
	if len(cands) == 0 {
		return victimPlan{}, false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].pod, cands[j].pod
		if priority(a) != priority(b) {
			return priority(a) < priority(b)
		}
		return startTime(a).After(startTime(b))
	})
	one := &snapshot{
		cluster: (&placement.Cluster{Nodes: []placement.Node{snap.cluster.Nodes[ni]}}).Clone(),
		nodes:   []*corev1.Node{snap.nodes[ni]}, inv: []inventory.Node{snap.inv[ni]},
		byName: map[string]int{snap.nodes[ni].Name: 0}, uuidPos: []map[string]int{snap.uuidPos[ni]},
		onNode: make([][]booking, 1),
	}
	taken := map[string]int{}
	vp := victimPlan{node: ni}
	for _, b := range cands {
		if k := s.groupKey(b.pod); k != "" {
			if taken[k] >= surplus[k] {
				continue // would take the gang below its minimum
			}
			taken[k]++
		}
		for _, part := range b.parts {
			d := part.dec
			d.Node = 0
			if err := one.cluster.Release(&part.pod, d); err != nil {
				return victimPlan{}, false
			}
		}
		vp.victims = append(vp.victims, b.pod)
		vp.maxPrio = max(vp.maxPrio, priority(b.pod))
		if _, o, _ := s.plan(one, pod); o == outcomeBound {
			return vp, true
		}
	}
	return victimPlan{}, false
}

// gangSurplus is, per gang, how many bound members exceed its minimum.
func (s *Scheduler) gangSurplus(snap *snapshot) map[string]int {
	bound := map[string]int{}
	minimum := map[string]int{}
	for _, bs := range snap.onNode {
		for _, b := range bs {
			if k := s.groupKey(b.pod); k != "" {
				bound[k]++
				if n, err := s.minMember(b.pod); err == nil {
					minimum[k] = n
				}
			}
		}
	}
	out := map[string]int{}
	for k, n := range bound {
		out[k] = max(0, n-minimum[k])
	}
	return out
}

// ranLongEnough reports whether a pod has run the minimum runtime; a pod
// that has not started yet has not.
func (s *Scheduler) ranLongEnough(p *corev1.Pod) bool {
	if s.cfg.PreemptionMinRuntime <= 0 {
		return true
	}
	return p.Status.StartTime != nil && time.Since(p.Status.StartTime.Time) >= s.cfg.PreemptionMinRuntime
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func startTime(p *corev1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
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
