package kubefilter

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
)

// ForFramework returns pod as the plugins should see it: without the GPU
// resources Tessera places (workload.GPUResources), so NodeResourcesFit
// never counts them. A fractional tessera.io/gpu: 1 is a share of a GPU,
// not one of the node's allocatable units, and a node's GPUs are Tessera's
// to place (package placement), whatever its device plugin advertises.
// Pod itself is returned when it asks for none of them.
func ForFramework(pod *corev1.Pod) *corev1.Pod {
	if !asksGPU(pod) {
		return pod
	}
	p := pod.DeepCopy()
	for i := range p.Spec.InitContainers {
		strip(&p.Spec.InitContainers[i].Resources)
	}
	for i := range p.Spec.Containers {
		strip(&p.Spec.Containers[i].Resources)
	}
	if p.Spec.Resources != nil {
		strip(p.Spec.Resources)
	}
	return p
}

func asksGPU(pod *corev1.Pod) bool {
	has := func(r *corev1.ResourceRequirements) bool {
		for _, n := range workload.GPUResources() {
			if _, ok := r.Requests[corev1.ResourceName(n)]; ok {
				return true
			}
			if _, ok := r.Limits[corev1.ResourceName(n)]; ok {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if has(&cs[i].Resources) {
				return true
			}
		}
	}
	return pod.Spec.Resources != nil && has(pod.Spec.Resources)
}

func strip(r *corev1.ResourceRequirements) {
	for _, n := range workload.GPUResources() {
		delete(r.Requests, corev1.ResourceName(n))
		delete(r.Limits, corev1.ResourceName(n))
	}
}

// plainResource: resources Tessera's fast path already accounts for (CPU
// and memory, with init containers and overhead) or places itself (GPUs).
func plainResource(n corev1.ResourceName) bool {
	return n == corev1.ResourceCPU || n == corev1.ResourceMemory || slices.Contains(workload.GPUResources(), string(n))
}
