// Package placement is Tessera's pure placement engine: it decides on which
// node, and on which GPU(s) of that node, a pod goes.
//
// It owns the cluster snapshot (Cluster, Node, GPU: free CPU, memory, pod
// slots, GPU compute and GPU memory, model labels, NUMA and NVLink
// topology), the MIG GPUs (their instances and free start slots; mig.go,
// docs/mig.md), the
// feasibility units (one small check per resource, whose rejections
// Explain and NoFitError give as figures an adapter can put in its own
// words; the first, Node.Closed, is a node taking no new work at all,
// with the reason the adapter gave), the sharing rules a node's sharing modes set (SharingFit:
// exclusive GPUs, MPS, memory oversubscription; a reason code each front
// door words itself), the scoring policies
// (one file each, sharing the Policy interface), the explicit, checked
// step that applies or releases a decision on a snapshot, and the one way
// a decision becomes the binding.Share of each GPU it names (Shares,
// shares.go), which every front door calls.
//
// Policies never mutate the snapshot they read; Apply is a separate step and
// returns an error (never panics) when a decision would over-allocate.
// Apply and Release record the node they changed, so that a policy whose
// score depends only on a node's state can keep the nodes grouped by state
// and score each group once (classchoose.go), deciding exactly as it does
// node by node.
// Everything is deterministic given a seed and there is no package-level
// mutable state.
//
// The package must not import Kubernetes, talk to devices or read files: the
// Kubernetes scheduler, the host daemon and the trace simulator (tracesim)
// are thin adapters around it.
package placement
