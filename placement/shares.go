package placement

import (
	"fmt"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// Turning a decision into shares lives here, the one place every front
// door (the Kubernetes scheduler, the host daemon, the DRA driver, the
// replay) calls: it needs the engine's Decision and MIG choices, which
// binding (a types package) must not import, and placement already reads
// request, inventory and catalog; binding imports none of them, so
// placement importing binding makes no cycle.

// Shares turns decision d for one part (request r) on node n into one
// binding.Share per chosen GPU, in d's order, resolved against that GPU
// (GPUShare, MIGShare). inv is the node's inventory (UUIDs, MIG instances);
// cat names MIG profiles where the GPU's MIG.Spec is nil (nil: none). An
// instance d creates carries its parent's UUID (the node names it once
// created): a front door that names it otherwise rewrites it.
func Shares(n *Node, inv *inventory.Node, r request.GPU, d Decision, cat *catalog.Catalog) ([]binding.Share, error) {
	if r.MIGProfile != "" && len(d.MIG) != len(d.GPUs) {
		return nil, fmt.Errorf("node %s: MIG decision names %d GPUs but %d instances", n.Name, len(d.GPUs), len(d.MIG))
	}
	out := make([]binding.Share, 0, len(d.GPUs))
	for k, pos := range d.GPUs {
		if pos < 0 || pos >= len(n.GPUs) {
			return nil, fmt.Errorf("node %s: GPU position %d out of range (%d GPUs)", n.Name, pos, len(n.GPUs))
		}
		g := &n.GPUs[pos]
		ig, ok := inv.GPUByIndex(g.Index)
		if !ok {
			return nil, fmt.Errorf("node %s: GPU index %d not in the inventory", n.Name, g.Index)
		}
		if r.MIGProfile != "" {
			out = append(out, MIGShare(migSpecOf(g, cat), ig, d.MIG[k], r.MIGProfile))
			continue
		}
		out = append(out, GPUShare(r, ig.UUID, g.Index, g.MemoryMiB))
	}
	return out, nil
}

// GPUShare is request r (not MIG) on one GPU (uuid, index, memoryMiB of
// memory): its defaults resolved (request.GPU.ResolveCompute,
// ResolveMemory), the whole GPU when exclusive, memory at least 1 MiB and
// its limit at least the guarantee.
func GPUShare(r request.GPU, uuid string, index int, memoryMiB int64) binding.Share {
	c, cl := r.ResolveCompute(memoryMiB)
	m, ml := r.ResolveMemory(memoryMiB)
	if r.Exclusive {
		c, cl, m, ml = request.Whole, request.Whole, memoryMiB, memoryMiB
	}
	return binding.Share{UUID: uuid, Index: index, ComputeMilli: c, ComputeLimitMilli: cl, MemoryMiB: max(m, 1), MemoryLimitMiB: max(ml, m, 1)}
}

// MIGShare is one whole MIG instance of profile on GPU parent: the
// existing one ch names (its UUID), or the one to create at ch.Start (the
// parent's UUID until it exists). Its compute is the profile's compute
// slices over the GPU's and its memory the profile's, both from spec (nil:
// unknown geometry, a whole GPU's compute and 1 MiB); an existing
// instance's memory, when the inventory reports it, wins.
func MIGShare(spec *catalog.MIGSpec, parent *inventory.GPU, ch MIGChoice, profile string) binding.Share {
	s := binding.Share{UUID: ch.UUID, Index: parent.Index, MIGProfile: profile,
		ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MemoryMiB: 1, MemoryLimitMiB: 1,
		MIG: &binding.MIGInstance{GPU: parent.UUID, Start: ch.Start, Create: ch.Create}}
	if ch.Create {
		s.UUID = parent.UUID
	}
	if i := spec.ProfileIndex(profile); i >= 0 && spec.ComputeSlices > 0 {
		p := spec.Profiles[i]
		c := int64(p.ComputeSlices) * request.Whole / int64(spec.ComputeSlices)
		s.MIGProfile, s.ComputeMilli, s.ComputeLimitMilli = p.Name, c, c
		s.MemoryMiB, s.MemoryLimitMiB = p.MemoryMiB, p.MemoryMiB
	}
	if !ch.Create {
		for _, in := range parent.MIGInstances {
			if in.UUID == ch.UUID && in.MemoryMiB > 0 {
				s.MemoryMiB, s.MemoryLimitMiB = in.MemoryMiB, in.MemoryMiB
			}
		}
	}
	return s
}

// MIGSpecOf is model's MIG geometry in cat, nil when cat is nil or knows
// none.
func MIGSpecOf(cat *catalog.Catalog, model string) *catalog.MIGSpec {
	if cat == nil {
		return nil
	}
	m, ok := cat.Lookup(model)
	if !ok || !m.SupportsMIG() {
		return nil
	}
	return m.MIG
}

// migSpecOf is g's MIG geometry: the snapshot's, else cat's for its model.
func migSpecOf(g *GPU, cat *catalog.Catalog) *catalog.MIGSpec {
	if g.MIG != nil && g.MIG.Spec != nil {
		return g.MIG.Spec
	}
	model := g.Model
	if g.MIG != nil && g.MIG.Model != "" {
		model = g.MIG.Model
	}
	return MIGSpecOf(cat, model)
}
