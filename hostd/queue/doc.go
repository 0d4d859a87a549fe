// Package queue decides the order in which waiting jobs start. It is pure:
// no I/O, no clock of its own. The daemon asks an Orderer for the start
// order and starts jobs strictly in that order, stopping at the first that
// does not fit (no backfill), so a large job is never overtaken forever by
// smaller ones.
//
// PriorityFIFO, the default, orders by effective priority (higher first),
// then by submission sequence (earlier first). The effective priority is
// the job's priority plus one for every AgingStep it has waited, so a
// low-priority job eventually outranks any stream of newer high-priority
// jobs: nothing starves. FairShare, the daemon's default, orders across
// queues by the cluster's fair-share rules (package queueing) and uses
// PriorityFIFO within each; Tree builds the queue tree it and preemption's
// reclaim rule share.
package queue
