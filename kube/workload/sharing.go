package workload

import (
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// SharingNeeds is what SharingRule checks of a pod: its GPU requests and
// its sharing needs. A pod's are read once, not once per node.
func SharingNeeds(reqs []ContainerRequest, hostIPC bool) ([]request.GPU, placement.SharingNeeds) {
	gpus := make([]request.GPU, len(reqs))
	for i, r := range reqs {
		gpus[i] = r.GPU
	}
	// Oversubscribe is pod-wide: the first GPU container says it.
	return gpus, placement.SharingNeeds{Oversubscribe: len(reqs) > 0 && reqs[0].Oversubscribe, SharedIPC: hostIPC}
}

// SharingRule checks a pod's GPU requests (SharingNeeds) against how the
// node's agent shares its GPUs (placement.SharingOf its GPUNode sharing and
// status.memoryOversubscription) with the engine's rule
// (placement.SharingFit) and says why a node is ruled out in the pod's
// words, or "". MPS clients share memory with the
// node's MPS server, so a pod without spec.hostIPC is kept off MPS nodes
// here rather than refused by the agent when kubelet allocates (the pod
// would then fail on the node).
func SharingRule(gpus []request.GPU, needs placement.SharingNeeds, node placement.NodeSharing) string {
	switch placement.SharingFit(gpus, needs, node) {
	case placement.NeedsOversubscription:
		return "agent does not oversubscribe GPU memory (tessera agent --oversubscribe), which the pod asks for (" +
			NvshareResourceGPU + ", or " + AnnotationOversubscribe + `: "true")`
	case placement.WholeGPUsOnly:
		return "GPUs are exclusive (sharing: exclusive): whole GPUs only"
	case placement.MPSOneGPU:
		return "GPUs are shared through MPS (sharing: mps): one GPU per container"
	case placement.MPSNeedsSharedIPC:
		return "GPUs are shared through MPS (sharing: mps): the pod needs spec.hostIPC: true"
	}
	return ""
}
