// Package boundpods says what a pod bound to a node holds there: whether it
// still occupies the node (bound and not finished), its CPU and memory
// requests as kube-scheduler counts them, the GPU shares its assignment
// annotation (tessera.io/assignment) grants, and all of it, with the one
// pod slot it takes, as the hold the scheduler books (Hold). show-gpus (kube/clusterinv) subtracts the same
// shares from the GPUNode inventory, so both count a bound pod alike.
//
// It reads pod objects only: it must not call the API server, place pods or
// keep state.
package boundpods
