package kubeletsim

// Pod is a pod as the stand-in admits it.
type Pod struct {
	Namespace, Name, UID string
	InitContainers       []Container
	Containers           []Container
}

// Container is a container and its request of the plugin's resource.
type Container struct {
	Name    string
	Devices int
	// Restartable marks an init container as a sidecar (kubelet lists
	// those in PodResources; regular init containers it does not).
	Restartable bool
}

// Allocation is what one container got.
type Allocation struct {
	DeviceIDs []string
	Envs      map[string]string
	Mounts    map[string]string // container path -> host path
	ReadOnly  map[string]bool   // container paths of the read-only mounts
	CDI       []string
}

func (p Pod) key() string { return p.Namespace + "/" + p.Name }

// ordered lists the containers in kubelet's allocation order.
func (p Pod) ordered() []Container {
	return append(append([]Container(nil), p.InitContainers...), p.Containers...)
}
