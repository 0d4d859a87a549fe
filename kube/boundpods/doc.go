// Package boundpods says what a pod bound to a node holds there: whether it
// still occupies the node (bound and not finished) and the GPU shares its
// assignment annotation (tessera.io/assignment) grants. The scheduler books
// these on its snapshot; show-gpus (kube/clusterinv) subtracts them from
// the GPUNode inventory, so both count a bound pod the same way.
//
// It reads pod objects only: it must not call the API server, place pods or
// keep state.
package boundpods
