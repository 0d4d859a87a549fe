// Package membership reads what a pending or bound pod belongs to: its
// gang (a tessera.io/pod-group label, a Volcano PodGroup, a
// scheduler-plugins PodGroup, a Kubernetes Workload API PodGroup with the
// gang policy, or the Job that runs it with a parallelism above one), the
// gang's minimum and timeout, and the queue that serves it; from the pod
// and the Jobs and PodGroups it names.
//
// It reads only; it must not decide (grouping, timeouts and order are
// package dispatch's) nor watch (the scheduler's informers do).
package membership
