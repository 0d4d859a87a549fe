package kube

import "github.com/tessera-gpu/tessera/kube/workload"

// Keys Tessera uses on Kubernetes objects. The assignment annotation is
// binding.AnnotationKey; the resource a container requests is
// workload.ResourceGPU, named here for the agent's device plugin.
const (
	// ResourceGPU is the device plugin resource. Each device is a slot on
	// one GPU (or MIG instance); a container requests one per GPU it uses,
	// so kubelet and ResourceQuota count GPU attachments.
	ResourceGPU = workload.ResourceGPU

	// ResourceGPUMemory is the node's total GPU memory in bytes, published
	// on the Node as an extended resource so quotas and kubelet can count
	// pods that request it.
	ResourceGPUMemory = "tessera.io/gpu-memory"
)
