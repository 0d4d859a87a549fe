package inventory

import (
	"fmt"

	"github.com/tessera-gpu/tessera/catalog"
)

// MIGLayout returns the GPU's MIG instances as a catalog layout, checked
// against spec (the GPU model's MIG geometry): every instance must have a
// known start and profile, and together they must be a valid layout. ok
// is false, with no error, when some instance's start is unknown: the
// layout then cannot be checked or extended.
func (g *GPU) MIGLayout(spec *catalog.MIGSpec) (layout []catalog.MIGPlacement, ok bool, err error) {
	for _, m := range g.MIGInstances {
		if m.Start == nil {
			return nil, false, nil
		}
		layout = append(layout, catalog.MIGPlacement{Profile: m.Profile, Start: *m.Start})
	}
	if err := spec.CheckLayout(layout); err != nil {
		return nil, false, fmt.Errorf("GPU %s (%s): MIG layout: %w", g.UUID, g.Model, err)
	}
	return layout, true, nil
}

// MIGFreeSlots lists the memory slices none of the GPU's instances
// occupies, ascending; ok is false when an instance's start is unknown or
// the layout breaks spec's rules.
func (g *GPU) MIGFreeSlots(spec *catalog.MIGSpec) (free []int, ok bool) {
	layout, ok, err := g.MIGLayout(spec)
	if !ok || err != nil {
		return nil, false
	}
	var used uint32
	for _, pl := range layout {
		used |= spec.SlotMask(spec.ProfileIndex(pl.Profile), pl.Start)
	}
	for k := 0; k < spec.MemorySlices; k++ {
		if used&(1<<k) == 0 {
			free = append(free, k)
		}
	}
	return free, true
}
