package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// reservation holds one node for the pod that has waited longest past
// Config.ReservationWait, so that a stream of smaller pods cannot starve it:
// other pods may use the node only where the reserved pod still fits
// beside them (backfill).
type reservation struct {
	uid  types.UID
	pod  *corev1.Pod
	node string
}

// maybeReserve records when the pod first failed to fit and, once it has
// waited ReservationWait with no reservation in force, reserves for it the
// eligible node with the most free GPU compute.
func (s *Scheduler) maybeReserve(snap *snapshot, pod *corev1.Pod) {
	if s.cfg.ReservationWait <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since, ok := s.blocked[pod.UID]
	if !ok {
		s.blocked[pod.UID] = time.Now()
		return
	}
	if s.reserved != nil || time.Since(since) < s.cfg.ReservationWait {
		if s.reserved != nil && s.reserved.uid == pod.UID {
			s.reserved.pod = pod
		}
		return
	}
	best, bestFree := "", int64(-1)
	for i, n := range snap.cluster.Nodes {
		var free int64
		for _, g := range n.GPUs {
			free += g.FreeMilli
		}
		if free > bestFree && eligibleNoTaints(pod, snap.nodes[i]) {
			best, bestFree = n.Name, free
		}
	}
	if best != "" {
		s.reserved = &reservation{uid: pod.UID, pod: pod, node: best}
		s.cfg.Log.Info("reserved a node for a long-blocked pod", "pod", pod.Namespace+"/"+pod.Name, "node", best)
	}
}

// unblock forgets a pod's wait, and its reservation once it is placed.
func (s *Scheduler) unblock(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blocked, pod.UID)
	if s.reserved != nil && s.reserved.uid == pod.UID {
		s.reserved = nil
	}
}

func (s *Scheduler) reservedNode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserved == nil {
		return ""
	}
	return s.reserved.node
}

// backfillOK reports whether a plan respects the reservation: the plan is
// not on the reserved node, is the reserved pod's own, or leaves room there
// for the reserved pod.
func (s *Scheduler) backfillOK(snap *snapshot, pod *corev1.Pod, pl plan) bool {
	s.mu.Lock()
	r := s.reserved
	s.mu.Unlock()
	if r == nil || r.uid == pod.UID || pl.assignment.Node != r.node {
		return true
	}
	scratch := snap.scratch()
	s.book(scratch, pod, pl)
	_, o, _ := s.plan(scratch, r.pod)
	return o == outcomeBound
}

// gcReservations forgets pods that are gone or placed.
func (s *Scheduler) gcReservations(seen map[types.UID]bool, occupying []*corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range occupying {
		delete(s.blocked, p.UID)
		if s.reserved != nil && s.reserved.uid == p.UID {
			s.reserved = nil
		}
	}
	for uid := range s.blocked {
		if !seen[uid] {
			delete(s.blocked, uid)
		}
	}
	if s.reserved != nil && !seen[s.reserved.uid] {
		s.reserved = nil
	}
}

// eligibleNoTaints applies the pod's node constraints to a node.
func eligibleNoTaints(pod *corev1.Pod, n *corev1.Node) bool {
	return eligible(pod, nodeaffinity.GetRequiredNodeAffinity(pod), n) == ""
}
