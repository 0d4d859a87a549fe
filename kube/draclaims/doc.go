// Package draclaims allocates the DRA ResourceClaims of the pods Tessera's
// Kubernetes scheduler binds, as kube-scheduler's DRA plugin does, with
// the scheduler's policy choosing the GPUs: it resolves a pending pod's
// claims (PodClaims: claims it names and claims made from its templates),
// allocates them on the devices the policy chose with the upstream
// structured allocator (Allocate, through kube/dra), holds the claims the
// bindings write until the informer shows them (assumed: Assume, Forget,
// Wrote, Claims), and writes them before the binding and undoes them after
// a failed one (Write, Undo).
//
// It must not place, decide (which node, which GPU: the scheduler's policy
// and the engine), or hold the engine's cluster (the scheduler's snapshot
// books the allocated claims).
package draclaims
