// Package queueing holds the fair-share rules every Tessera front door uses
// to decide whose pending work goes next: hierarchical queues with a
// guaranteed quota, an over-quota weight, a hard limit, a priority and an
// optional idle-reclaim time (off by default; package preemption applies
// it); usage measured over GPU compute, GPU memory, CPU and memory; and
// Dominant Resource Fairness (DRF) to order queues.
//
// Spec is a queue as people write it (the Queue resource's fields, the
// host daemon's --config file), converted with errors that name the field.
//
// It is pure: no Kubernetes types, no I/O, no clocks. The Kubernetes
// scheduler and the host daemon feed it queues, usage and pending work, and
// ask it what to try next and whether a workload would break a limit.
package queueing
