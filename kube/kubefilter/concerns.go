package kubefilter

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Concerns tells whether any plugin could rule a node out for pod beyond
// what Tessera's fast path already checks (schedulability, NoSchedule and
// NoExecute taints, nodeSelector and required node affinity, CPU and
// memory with init containers and overhead, GPUs). False means the pod
// may be decided by class, unfiltered (issue 36 item 4). True when pod
// has required pod (anti-)affinity, a DoNotSchedule topology spread
// constraint, a host port, a volume other than the node-local kinds, a
// resource other than CPU, memory and GPUs (ephemeral storage, hugepages,
// extended resources), or when a pod already placed has a required
// anti-affinity term that selects pod. The node's pod count concerns no
// pod: the engine counts it for every pod (placement.Node.Pods).
func (f *Filter) Concerns(pod *corev1.Pod) (bool, error) {
	if specConcerns(pod) {
		return true, nil
	}
	return f.repelled(pod)
}

func specConcerns(pod *corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !nodeLocal(v.VolumeSource) {
			return true
		}
	}
	if pod.Spec.Resources != nil && unplain(pod.Spec.Resources) {
		return true
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort > 0 {
					return true
				}
			}
			if unplain(&cs[i].Resources) {
				return true
			}
		}
	}
	for n := range pod.Spec.Overhead {
		if !plainResource(n) {
			return true
		}
	}
	return false
}

// nodeLocal: volume kinds no volume plugin (VolumeBinding,
// VolumeRestrictions, VolumeZone, NodeVolumeLimits) looks at.
func nodeLocal(v corev1.VolumeSource) bool {
	return v.EmptyDir != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil ||
		v.Projected != nil || v.HostPath != nil
}

func unplain(r *corev1.ResourceRequirements) bool {
	for n := range r.Requests {
		if !plainResource(n) {
			return true
		}
	}
	for n := range r.Limits {
		if !plainResource(n) {
			return true
		}
	}
	return false
}

// repelled: a placed pod's required anti-affinity selects pod (the
// InterPodAffinity direction the newcomer's own spec does not show). A
// term with a namespace selector counts as selecting it: namespace labels
// are not at hand, and a false "concerned" only costs a filter run. The
// picks Reserve defers are left out: no pod with such a term is deferred.
func (f *Filter) repelled(pod *corev1.Pod) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.cache.UpdateSnapshot(f.logger, f.snapshot); err != nil {
		return false, wrap("snapshot for pod "+key(pod), err)
	}
	infos, err := f.snapshot.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if err != nil {
		return false, wrap("anti-affinity list", err)
	}
	podLabels := labels.Set(pod.Labels)
	for _, ni := range infos {
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			for _, t := range pi.GetRequiredAntiAffinityTerms() {
				if !t.Selector.Matches(podLabels) {
					continue
				}
				if t.Namespaces.Has(pod.Namespace) || t.NamespaceSelector != labels.Nothing() {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
