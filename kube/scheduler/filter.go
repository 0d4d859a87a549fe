package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// usable and admits apply the standard pod constraints that do not depend
// on resources: usable the node's own (readiness and schedulability, the
// same for every pod, so read once per snapshot), admits the pod's against
// the node (taints with effect NoSchedule or NoExecute against the pod's
// tolerations, and nodeSelector plus required node affinity). Each
// returns "" or the reason the node is ruled out.
func usable(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "node is unschedulable"
	}
	if !ready(n) {
		return "node is not Ready"
	}
	return ""
}

// tainted is 1 when n has a taint that keeps pods off (NoSchedule or
// NoExecute), else 0.
func tainted(n *corev1.Node) int {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return 1
		}
	}
	return 0
}

func admits(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, noSchedule, false); bad {
		return "untolerated taint " + t.Key
	}
	if ok, _ := affinity.Match(n); !ok {
		return "node selector or affinity does not match"
	}
	return ""
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sharingNeeds is what sharingRule checks of a pod: its GPU requests and
// its sharing needs. A pod's are read once, not once per node.
func sharingNeeds(reqs []workload.ContainerRequest, hostIPC bool) ([]request.GPU, placement.SharingNeeds) {
	gpus := make([]request.GPU, len(reqs))
	for i, r := range reqs {
		gpus[i] = r.GPU
	}
	// Oversubscribe is pod-wide: the first GPU container says it.
	return gpus, placement.SharingNeeds{Oversubscribe: len(reqs) > 0 && reqs[0].Oversubscribe, SharedIPC: hostIPC}
}

// sharingRule checks a pod's GPU requests (sharingNeeds) against how the
// node's agent shares its GPUs (placement.SharingOf its GPUNode sharing and
// status.memoryOversubscription) with the engine's rule
// (placement.SharingFit) and says why a node is ruled out in the pod's
// words, or "". MPS clients share memory with the
// node's MPS server, so a pod without spec.hostIPC is kept off MPS nodes
// here rather than refused by the agent when kubelet allocates (the pod
// would then fail on the node).
func sharingRule(gpus []request.GPU, needs placement.SharingNeeds, node placement.NodeSharing) string {
	switch placement.SharingFit(gpus, needs, node) {
	case placement.NeedsOversubscription:
		return "agent does not oversubscribe GPU memory (tessera agent --oversubscribe), which the pod asks for (" +
			workload.NvshareResourceGPU + ", or " + workload.AnnotationOversubscribe + `: "true")`
	case placement.WholeGPUsOnly:
		return "GPUs are exclusive (sharing: exclusive): whole GPUs only"
	case placement.MPSOneGPU:
		return "GPUs are shared through MPS (sharing: mps): one GPU per container"
	case placement.MPSNeedsSharedIPC:
		return "GPUs are shared through MPS (sharing: mps): the pod needs spec.hostIPC: true"
	}
	return ""
}
