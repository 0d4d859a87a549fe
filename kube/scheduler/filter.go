package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
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
