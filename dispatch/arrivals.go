package dispatch

import (
	"cmp"
	"slices"

	"github.com/tessera-gpu/tessera/placement"
)

// Policies that learn the workload online (placement.Observer: FGD's and
// Tessera's online variants learn the typical workload from what
// arrives) are told of each workload once, when it arrives: a workload
// added, or added again as another instance, is told at the start of the
// next cycle, before anything is placed, in arrival order; one that left
// before that cycle never arrived. The front door says what it teaches
// (Frame.Arrival); the core decides when.

// teach tells f's policies of the workloads added since the last cycle.
func (c *Core) teach(f Frame) {
	ids := c.arrived
	c.arrived = nil
	if f.Arrival == nil || len(ids) == 0 {
		return
	}
	seen := make(map[string]bool, len(ids))
	arrived := make([]*state, 0, len(ids))
	for _, id := range ids {
		if s, ok := c.items[id]; ok && !seen[id] {
			seen[id] = true
			arrived = append(arrived, s)
		}
	}
	slices.SortFunc(arrived, func(a, b *state) int {
		if x := a.Arrived.Compare(b.Arrived); x != 0 {
			return x
		}
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.ID, b.ID))
	})
	for _, s := range arrived {
		own, parts, ok := f.Arrival(s.ID)
		if !ok {
			continue
		}
		tell(f.Policy, parts)
		if own != nil && own != f.Policy {
			tell(own, parts)
		}
	}
}

// tell tells pol, if it learns, of one workload's parts.
func tell(pol placement.Policy, parts []placement.Pod) {
	obs, ok := pol.(placement.Observer)
	if !ok {
		return
	}
	for i := range parts {
		p := parts[i]
		obs.Observe(&p)
	}
}
