// Package dispatch is the scheduling core every front door drives: it owns
// the state that lives between scheduling cycles and runs package cycle
// on it. Events come in (a workload waits, changes or goes; the cluster
// changed; a binding succeeded or failed), a cycle runs on a frame the
// front door gives (the queues and the translation of each waiting
// workload; the cluster with its bookings and the running workloads are
// the core's books, package booked, which the front door steps with what
// its world shows, or the frame's own), and actions
// come out (bind these, evict those for whom, these wait and why, try
// again at). The clock is the caller's: every call that needs the time is
// given it, so a simulator drives the same core on a virtual clock.
//
// It owns: the pending set (from events, never a re-list), the order
// within a queue (priority, optional aging, arrival), the retry backoff,
// gang grouping and schedule timeouts, the workloads whose binding is in
// flight (assumed: not pending, not yet acknowledged, booked as the cycle
// decided until the front door books them bound), the reservation for
// the workload or gang that has waited longest, how long a preemptor
// waits for its victims, and the room they free, held for it until it is
// placed (its nomination), and when the policies that learn the workload
// online are told of an arrival (once, at the next cycle: Frame.Arrival).
//
// It must not import Kubernetes or host types, do I/O or read the wall
// clock, and must not word outcomes for a front door beyond the engine's
// own messages: the front doors translate in and apply out.
package dispatch
