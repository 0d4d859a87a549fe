// Package podstatus reports what the Kubernetes scheduler decided on a
// pod: a PodScheduled=False condition with a Warning event for a pod left
// pending (once per pod and message, written by a few workers off the
// scheduling loop, a waiting gang member's after a grace), a Normal event
// for a pod bound, a Warning event for a preemption victim.
//
// It writes only what it is told; it must not decide (why a pod waits,
// its reason and message are the scheduler's) nor bind or evict.
package podstatus
