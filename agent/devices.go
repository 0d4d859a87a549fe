package agent

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tessera-gpu/tessera/agent/deviceplugin"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/inventory"
)

// Devices is the node's shareable units (GPUs, or MIG instances of GPUs in
// MIG mode) and their health; it is safe for concurrent use.
type Devices struct {
	slotsPerUnit int
	mu           sync.Mutex
	node         inventory.Node
	units        []unit
}

type unit struct {
	uuid    string
	gpu     string // UUID of the physical GPU
	numa    int
	healthy bool
}

// NewDevices returns the units of node, slotsPerUnit device slots each.
func NewDevices(node inventory.Node, slotsPerUnit int) (*Devices, error) {
	if slotsPerUnit < 1 || slotsPerUnit > handoff.MaxSlotsPerUnit {
		return nil, fmt.Errorf("slots per GPU: must be in [1, %d], got %d", handoff.MaxSlotsPerUnit, slotsPerUnit)
	}
	if err := node.Validate(); err != nil {
		return nil, err
	}
	d := &Devices{slotsPerUnit: slotsPerUnit, node: node}
	for _, u := range node.Units() {
		g := &node.GPUs[u.GPU]
		d.units = append(d.units, unit{uuid: u.UUID, gpu: g.UUID, numa: g.NUMANode, healthy: g.Health != inventory.Unhealthy})
	}
	return d, nil
}

// Node returns the inventory with current health.
func (d *Devices) Node() inventory.Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.node
	n.GPUs = append([]inventory.GPU(nil), d.node.GPUs...)
	return n
}

// IsGPU reports whether uuid is a physical GPU of the node (the parent of
// a MIG instance to be created).
func (d *Devices) IsGPU(uuid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range d.node.GPUs {
		if g.UUID == uuid {
			return true
		}
	}
	return false
}

// Known reports whether uuid is a unit of the node.
func (d *Devices) Known(uuid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, u := range d.units {
		if u.uuid == uuid {
			return true
		}
	}
	return false
}

// SetHealth marks a physical GPU (and its MIG instances) healthy or not;
// it reports whether anything changed.
func (d *Devices) SetHealth(gpuUUID string, h inventory.Health, reason string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for i := range d.node.GPUs {
		g := &d.node.GPUs[i]
		if g.UUID == gpuUUID && (g.Health != h || g.HealthReason != reason) {
			g.Health, g.HealthReason = h, reason
			changed = true
		}
	}
	for i := range d.units {
		u := &d.units[i]
		if u.gpu == gpuUUID && u.healthy != (h != inventory.Unhealthy) {
			u.healthy = h != inventory.Unhealthy
			changed = true
		}
	}
	return changed
}

// Slots lists every device slot with its health and NUMA node.
func (d *Devices) Slots() []deviceplugin.Slot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]deviceplugin.Slot, 0, len(d.units)*d.slotsPerUnit)
	for _, u := range d.units {
		for k := range d.slotsPerUnit {
			out = append(out, deviceplugin.Slot{ID: handoff.SlotID(u.uuid, k), Healthy: u.healthy, NUMANode: u.numa})
		}
	}
	return out
}

// SetMIG updates the published MIG instances: a GPU layout names (a
// managed GPU, by UUID) gets those instances, and every other GPU in MIG
// mode keeps its instances with each marked in use when inUse says a
// container holds it. The device plugin's units stay as they were at start
// (an instance created for a container is not a unit kubelet hands out);
// it reports whether anything changed.
func (d *Devices) SetMIG(layout map[string][]inventory.MIGInstance, inUse func(uuid string) bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	gpus := slices.Clone(d.node.GPUs)
	changed := false
	for i := range gpus {
		g := &gpus[i]
		if g.MIGMode != inventory.MIGEnabled {
			continue
		}
		ins, ok := layout[g.UUID]
		if !ok {
			ins = slices.Clone(g.MIGInstances)
			for k := range ins {
				ins[k].InUse = ins[k].UUID != "" && inUse(ins[k].UUID)
			}
		}
		if !slices.EqualFunc(ins, g.MIGInstances, sameMIGInstance) {
			g.MIGInstances, changed = ins, true
		}
	}
	d.node.GPUs = gpus
	return changed
}

func sameMIGInstance(a, b inventory.MIGInstance) bool {
	return a.UUID == b.UUID && a.Profile == b.Profile && a.MemoryMiB == b.MemoryMiB && a.SMCount == b.SMCount &&
		a.InUse == b.InUse && (a.Start == nil) == (b.Start == nil) && (a.Start == nil || *a.Start == *b.Start)
}
