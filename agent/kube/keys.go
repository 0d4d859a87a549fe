package kube

// Keys Tessera uses on Kubernetes objects.
const (
	// AssignmentAnnotation is the pod annotation the Tessera scheduler
	// writes before binding: a binding.Assignment in its JSON encoding.
	AssignmentAnnotation = "tessera.io/assignment"

	// ResourceGPU is the device plugin resource. Each device is a slot on
	// one GPU (or MIG instance); a container requests one per GPU it uses,
	// so kubelet and ResourceQuota count GPU attachments.
	ResourceGPU = "tessera.io/gpu"

	// ResourceGPUMemory is the node's total GPU memory in bytes, published
	// on the Node as an extended resource so quotas and kubelet can count
	// pods that request it.
	ResourceGPUMemory = "tessera.io/gpu-memory"
)
