// Package cycle is one scheduling cycle over a snapshot, the same for every
// front door: pending workloads (a pod's containers or a host job, as
// engine pods) are served queue by queue in fair-share order (package
// queueing's DRF), checked against their queue's hard limits, and placed by
// the placement engine; a gang is placed all or nothing. A workload that
// fits nowhere, or a gang whose members do not fit together, may name
// running workloads to stop for it (preempt within a queue by priority,
// reclaim a queue's guarantee from a queue above its own, stop an idle
// holder of a queue that asks for it: package preemption's rules), planned on what-if releases; a gang's plan spans
// as many nodes as its members need. The room a plan counts on is held
// for it (Snapshot.Nominations, and for the rest of the run that made it):
// workloads of its priority or lower may not take it. Every
// booking and what-if release of a cycle goes through a Statement, so a
// gang that does not fit whole, or a preemption plan, leaves the snapshot
// exactly as it found it. The result is one Outcome per
// workload: where each part goes, or why it waits, with the reasons the
// nodes turned it down counted per reason (as Nomad's exhausted-node
// metrics do).
//
// It is pure: no Kubernetes or host types, no I/O, no clock. The Kubernetes
// scheduler, the host daemon and the simulator translate their pods, jobs
// and trace rows into a Snapshot, run a Session and apply its outcomes
// (bindings, job starts, simulated starts). It must not learn the workload
// (policies are told of arrivals by the caller, placement.Observer) and
// must not decide how an outcome is applied.
package cycle
