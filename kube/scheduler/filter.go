package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

// eligible applies the standard pod constraints that do not depend on
// resources: node readiness and schedulability, taints (NoSchedule and
// NoExecute) against the pod's tolerations, and nodeSelector plus required
// node affinity. It returns "" or the reason the node is ruled out.
func eligible(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "node is unschedulable"
	}
	if !ready(n) {
		return "node is not Ready"
	}
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

// sharingRule checks a pod's GPU requests against how the node's agent
// shares its GPUs (GPUNode sharing): exclusive GPUs take whole-GPU requests
// only, and GPUs shared through MPS take containers of one GPU. Modes are
// set per node by the agent (MIG GPUs aside), so the node's non-MIG GPUs
// decide. MPS clients also share memory with the node's MPS server, so a
// pod without spec.hostIPC is kept off MPS nodes here rather than refused
// by the agent when kubelet allocates (the pod would then fail on the
// node). A pod that asks for memory oversubscription (nvshare.com/gpu, or
// tessera.io/oversubscribe) goes only to nodes whose agent oversubscribes.
// It returns "" or the reason the node is ruled out.
func sharingRule(reqs []workload.ContainerRequest, hostIPC bool, n *inventory.Node) string {
	if len(reqs) > 0 && reqs[0].Oversubscribe && !n.MemoryOversubscription {
		// Oversubscribe is pod-wide: the first GPU container says it.
		return "agent does not oversubscribe GPU memory (tessera agent --oversubscribe), which the pod asks for (" +
			workload.NvshareResourceGPU + ", or " + workload.AnnotationOversubscribe + `: "true")`
	}
	fractions, mps := false, false
	for _, g := range n.GPUs {
		if g.MIGMode == inventory.MIGEnabled {
			continue
		}
		fractions = fractions || inventory.AllowsFractions(g.Sharing)
		mps = mps || g.Sharing == inventory.SharingMPS
	}
	for _, r := range reqs {
		g := r.GPU
		if g.Count == 0 || g.MIGProfile != "" {
			continue
		}
		whole := g.Exclusive || g.ComputeMilli >= request.Whole
		if !whole && !fractions {
			return "GPUs are exclusive (sharing: exclusive): whole GPUs only"
		}
		if mps && g.Count > 1 {
			return "GPUs are shared through MPS (sharing: mps): one GPU per container"
		}
		if mps && !hostIPC {
			return "GPUs are shared through MPS (sharing: mps): the pod needs spec.hostIPC: true"
		}
	}
	return ""
}
