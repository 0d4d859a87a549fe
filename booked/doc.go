// Package booked keeps the cluster as booked between scheduling cycles:
// the nodes by name with their inventories, and what each running or
// assumed workload holds on them, by workload ID. Front doors step it with
// events (a node's inventory set or gone, a workload's hold booked or
// released); the scheduling core reads from it the engine's cluster for a
// cycle, the running workloads (preemption's candidates) and what each
// queue uses, and records in it what a cycle placed (Assume, with the
// core's start, which the front door's booking keeps) until the front
// door books the workload as bound.
//
// Accounting is exact: a booking is released by giving back exactly what
// it took. A hold that no longer fits its node (the node reports less
// than is booked on it) is booked saturating at zero and makes that node
// inexact; any later change there books the node again from its
// inventory, every hold in booking order, so the result never depends on
// the order of events (always what New with the same nodes and holds,
// booked in order, gives: TestIncrementalMatchesFresh). A change of the
// node set lays every node out again in name order.
//
// It owns no policy (placement decides, cycle runs a pass, dispatch
// orders) and must not import front-door types (Kubernetes, the host
// daemon), do I/O or read the clock.
package booked
