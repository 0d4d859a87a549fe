package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// preemptionWait bounds how long a preemptor waits for its victims to exit
// before it may choose victims again.
const preemptionWait = 2 * time.Minute

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
