package catalog

import (
	"fmt"
	"sort"
	"strings"
)

// MIGPlacement is one GPU instance of a MIG layout: its profile and the
// memory slice it starts at.
type MIGPlacement struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

func (p MIGPlacement) String() string { return fmt.Sprintf("%s@%d", p.Profile, p.Start) }

// ProfileIndex returns the position in Profiles of the named profile
// (case ignored), or -1.
func (s *MIGSpec) ProfileIndex(name string) int {
	if s == nil {
		return -1
	}
	for i := range s.Profiles {
		if strings.EqualFold(s.Profiles[i].Name, name) {
			return i
		}
	}
	return -1
}

// ProfileNames lists the spec's profile names in table order.
func (s *MIGSpec) ProfileNames() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.Profiles))
	for i, p := range s.Profiles {
		out[i] = p.Name
	}
	return out
}

// SlotMask is the set of memory slices an instance of profile i occupies
// when it starts at start (bit k set for slice k).
func (s *MIGSpec) SlotMask(i, start int) uint32 {
	n := s.Profiles[i].MemorySlices
	return ((uint32(1) << n) - 1) << start
}

// Fits reports whether an instance of profile i can start at start next
// to the instances occupying used (media: one of them is +me). It is
// CanPlace without the reason, and allocates nothing.
func (s *MIGSpec) Fits(used uint32, media bool, i, start int) bool {
	p := &s.Profiles[i]
	if start < 0 || start+p.MemorySlices > s.MemorySlices || used&s.SlotMask(i, start) != 0 || (media && p.MediaExtended()) {
		return false
	}
	for _, st := range p.Starts {
		if st == start {
			return true
		}
	}
	return false
}

// CanPlace reports why an instance of profile i cannot start at start on
// a GPU whose instances occupy the memory slices in used and, when media
// is true, already hold a "+me" instance; "" when it can.
func (s *MIGSpec) CanPlace(used uint32, media bool, i, start int) string {
	p := &s.Profiles[i]
	ok := false
	for _, st := range p.Starts {
		if st == start {
			ok = true
			break
		}
	}
	if !ok {
		return fmt.Sprintf("%s cannot start at memory slice %d (valid starts: %s)", p.Name, start, intsString(p.Starts))
	}
	if start+p.MemorySlices > s.MemorySlices {
		return fmt.Sprintf("%s at %d runs past the GPU's %d memory slices", p.Name, start, s.MemorySlices)
	}
	if m := s.SlotMask(i, start); used&m != 0 {
		return fmt.Sprintf("%s at %d overlaps memory slices %s already taken", p.Name, start, maskString(used&m))
	}
	if media && p.MediaExtended() {
		return fmt.Sprintf("%s: the GPU already has a media-extension (+me) instance, and it has one set of media engines", p.Name)
	}
	return ""
}

// CheckLayout checks a whole MIG layout: known profiles, valid starts,
// no overlap, at most one +me instance, per-profile instance limits and
// compute slices within the GPU's. The order of the placements does not
// matter (each instance names its own start).
func (s *MIGSpec) CheckLayout(layout []MIGPlacement) error {
	if s == nil {
		return fmt.Errorf("the model does not support MIG")
	}
	var used uint32
	media := false
	count := make([]int, len(s.Profiles))
	compute := 0
	for k, pl := range layout {
		i := s.ProfileIndex(pl.Profile)
		if i < 0 {
			return fmt.Errorf("instance %d: profile %q is not one of %s", k, pl.Profile, strings.Join(s.ProfileNames(), ", "))
		}
		if why := s.CanPlace(used, media, i, pl.Start); why != "" {
			return fmt.Errorf("instance %d: %s", k, why)
		}
		p := &s.Profiles[i]
		used |= s.SlotMask(i, pl.Start)
		media = media || p.MediaExtended()
		if count[i]++; count[i] > p.MaxInstances {
			return fmt.Errorf("instance %d: more than %d instances of %s", k, p.MaxInstances, p.Name)
		}
		if compute += p.ComputeSlices; compute > s.ComputeSlices {
			return fmt.Errorf("instance %d: %s takes the layout past the GPU's %d compute slices", k, p.Name, s.ComputeSlices)
		}
	}
	return nil
}

// FreeStarts returns the starts at which an instance of profile i could
// be created next to the given layout (assumed valid), ascending.
func (s *MIGSpec) FreeStarts(used uint32, media bool, i int) []int {
	var out []int
	for _, st := range s.Profiles[i].Starts {
		if s.Fits(used, media, i, st) {
			out = append(out, st)
		}
	}
	return out
}

func intsString(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func maskString(m uint32) string {
	var v []int
	for k := 0; m>>k != 0; k++ {
		if m&(1<<k) != 0 {
			v = append(v, k)
		}
	}
	sort.Ints(v)
	return intsString(v)
}
