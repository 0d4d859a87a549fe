package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// preemptionWait bounds how long a preemptor waits for its victims to exit
// before it may choose victims again (the core keeps the wait).
const preemptionWait = 2 * time.Minute

// Default retry delays of a pod (or gang) that could not be bound; the same
// as kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds.
const (
	DefaultPodInitialBackoff = time.Second
	DefaultPodMaxBackoff     = 10 * time.Second
)

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}
