// Package preemption holds the victim-selection rules every Tessera front
// door uses when waiting work does not fit: which running workloads may be
// stopped for it, in what order, and which plan (set of victims) is best.
//
// Three rules make a running workload a candidate victim for a waiting one:
//
//   - priority preemption: the victim is in the same queue and has a lower
//     priority (priorities order work within a queue; across queues the
//     fair-share rules decide, so a priority never breaks another queue's
//     guarantee);
//   - reclaim: the waiting workload's queue, taking what it needs, stays
//     within its guaranteed share, while the victim's queue (another one)
//     is above its own guarantee. Priorities do not matter then;
//   - idle reclaim (off unless the victim's queue sets a time,
//     Rules.IdleAfter): the victim has held its GPUs idle at least that
//     long; any waiting workload that needs its room may stop it. It is
//     named only when neither rule above applies, so outcomes without the
//     setting are unchanged.
//
// A workload that has run less than the minimum runtime is never a victim,
// nor is a gang member whose eviction would take its gang below its
// minimum. Victims are taken lowest priority first, then most recently
// started (least work lost; Candidate.Order among those started at once,
// so the order never depends on the candidates' order), until the
// waiting workload fits; among nodes,
// the plan with the fewest victims wins, then the one whose most important
// victim has the lowest priority.
//
// It is pure: no Kubernetes types, no I/O, no clock of its own. The
// Kubernetes scheduler (kube/scheduler) and the host daemon (hostd) turn
// their pods or jobs into Candidates, ask this package which to stop, and
// do the stopping (an eviction, a SIGTERM).
package preemption
