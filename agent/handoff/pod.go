package handoff

import (
	"time"

	"github.com/tessera-gpu/tessera/binding"
)

// Pod is what the handoff needs to know of a pod bound to the node.
type Pod struct {
	Namespace, Name, UID string
	Created              time.Time
	// Containers are the containers that ask kubelet for Tessera devices,
	// in the order kubelet allocates them (init containers first, then
	// regular containers, each in spec order). Others are not listed.
	Containers []ContainerRequest
	// Assignment is the raw value of the pod's assignment annotation;
	// HasAssignment is false when the pod has none.
	Assignment    string
	HasAssignment bool
	// Terminal is true for pods that will not start again (Succeeded,
	// Failed) or are being deleted.
	Terminal bool
	// HostIPC is the pod's spec.hostIPC: its containers share the host's
	// IPC namespace, which MPS clients need (docs/handoff.md, "MPS mode").
	HostIPC bool
}

// ContainerRequest is one container's request of Tessera devices.
type ContainerRequest struct {
	Name string
	// Devices is the container's request of the device resource: the number
	// of GPUs (or MIG instances) it uses.
	Devices int
}

// Ref names a pod.
func (p Pod) Ref() PodRef { return PodRef{Namespace: p.Namespace, Name: p.Name} }

// PodRef is a pod's namespace and name, as kubelet's PodResources API names pods.
type PodRef struct{ Namespace, Name string }

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// KubeletPod is one pod in kubelet's PodResources report: the pods kubelet
// has admitted or is admitting, and the devices of this resource each of
// their containers holds.
type KubeletPod struct {
	Namespace, Name string
	// Devices maps every container kubelet lists to its device IDs of the
	// resource (empty when it holds none). kubelet does not list regular
	// init containers.
	Devices map[string][]string
}

// Ref names the pod.
func (p KubeletPod) Ref() PodRef { return PodRef{Namespace: p.Namespace, Name: p.Name} }

// Allocated names a container the node has already allocated devices for.
type Allocated struct {
	Pod       PodRef
	PodUID    string
	Container string
}

// Choice is the container an Allocate call is for and what it gets.
type Choice struct {
	Pod       Pod
	Container string
	GPUs      []binding.Share
	// Ambiguous is true when several waiting containers would get exactly
	// the same environment and this one was picked by age; the agent
	// confirms the identity at container start from kubelet's own record.
	Ambiguous bool
}
