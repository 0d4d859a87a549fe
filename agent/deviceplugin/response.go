package deviceplugin

import (
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/tessera-gpu/tessera/agent/handoff"
)

// Response turns a container's handoff into kubelet's Allocate answer.
func Response(h handoff.Handoff) *pluginapi.ContainerAllocateResponse {
	r := &pluginapi.ContainerAllocateResponse{Envs: h.Env, Annotations: h.Annotations}
	for _, m := range h.Mounts {
		r.Mounts = append(r.Mounts, &pluginapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
	}
	for _, n := range h.CDIDevices {
		r.CdiDevices = append(r.CdiDevices, &pluginapi.CDIDevice{Name: n})
	}
	return r
}

// Devices returns kubelet's device list for slots: each slot with its
// health and NUMA node (numa < 0 means unknown and adds no topology).
func Devices(slots []Slot) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(slots))
	for _, s := range slots {
		d := &pluginapi.Device{ID: s.ID, Health: pluginapi.Healthy}
		if !s.Healthy {
			d.Health = pluginapi.Unhealthy
		}
		if s.NUMANode >= 0 {
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(s.NUMANode)}}}
		}
		out = append(out, d)
	}
	return out
}

// Slot is one advertised device.
type Slot struct {
	ID       string
	Healthy  bool
	NUMANode int
}
