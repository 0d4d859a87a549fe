package migctl

import (
	"fmt"
	"sort"

	"github.com/tessera-gpu/tessera/inventory"
)

// Placed is an instance on a managed GPU as the driver lists it now, with
// the workload the manager booked it to.
type Placed struct {
	Instance
	// MemoryMiB is its profile's memory (catalog).
	MemoryMiB int64
	// Workload is the workload holding it (one the manager created it
	// for, or adopted it for at Reconcile); "" for an instance the manager
	// did not book (the operator's).
	Workload string
}

// Layout re-reads every managed GPU's instances from the driver (List),
// by GPU UUID, each GPU's in start order, and names the workload holding
// each. It is the node's MIG layout after creations and destructions, for
// publishing the inventory; it reads, never changes, the GPUs.
func (m *Manager) Layout() (map[string][]Placed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]Placed, len(m.gpus))
	for uuid, g := range m.gpus {
		list, err := List(g.Device, g.Spec)
		if err != nil {
			return nil, fmt.Errorf("GPU %s: list MIG instances: %w", uuid, err)
		}
		ps := make([]Placed, 0, len(list))
		for _, in := range list {
			in.GPU = uuid
			p := Placed{Instance: in}
			if i := g.Spec.ProfileIndex(in.Profile); i >= 0 {
				p.MemoryMiB = g.Spec.Profiles[i].MemoryMiB
			}
			for id, hs := range m.held {
				for _, h := range hs {
					if h.want.GPU == uuid && h.want.Start == in.Start && h.want.Profile == in.Profile {
						p.Workload = id
					}
				}
			}
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Start < ps[j].Start })
		out[uuid] = ps
	}
	return out, nil
}

// InventoryOf turns a GPU's layout into inventory instances: each with its
// UUID, profile, memory and start, in use when a workload holds it (booked
// in the manager) or inUse says so (an instance the front door hands out
// without creating it, held by one of its workloads; nil: none). smCount
// gives the SM count discovery read for an instance UUID (nil: unknown).
func InventoryOf(layout []Placed, inUse func(uuid string) bool, smCount func(uuid string) int) []inventory.MIGInstance {
	out := make([]inventory.MIGInstance, 0, len(layout))
	for _, p := range layout {
		in := inventory.MIGInstance{UUID: p.UUID, Profile: p.Profile, MemoryMiB: p.MemoryMiB, Start: inventory.Slot(p.Start),
			InUse: p.Workload != "" || (inUse != nil && p.UUID != "" && inUse(p.UUID))}
		if smCount != nil && p.UUID != "" {
			in.SMCount = smCount(p.UUID)
		}
		out = append(out, in)
	}
	return out
}
