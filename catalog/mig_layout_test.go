package catalog

import (
	"fmt"
	"strings"
	"testing"
)

// shapes of the 7-slice table by role: the name of the profile with c
// compute and m memory slices (me: the +me variant) on a model.
func profileNamed(t *testing.T, m Model, c, mem int, me bool) string {
	t.Helper()
	for _, p := range m.MIG.Profiles {
		if p.ComputeSlices == c && p.MemorySlices == mem && p.MediaExtended() == me {
			return p.Name
		}
	}
	t.Fatalf("%s has no %dg profile with %d memory slices (me %v)", m.Name, c, mem, me)
	return ""
}

// layout parses "3g@0 1g@4 1g2@6 1me@5" into placements for model m:
// 1g, 2g, 3g, 4g, 7g are the plain profiles, 1g2 the 1g profile with two
// memory slices, 1me the 1g+me profile, 2me the 2g+me profile (A30).
func layout(t *testing.T, m Model, s string) []MIGPlacement {
	t.Helper()
	var out []MIGPlacement
	for _, f := range strings.Fields(s) {
		var role string
		var start int
		parts := strings.SplitN(f, "@", 2)
		role = parts[0]
		if _, err := fmt.Sscan(parts[1], &start); err != nil {
			t.Fatalf("bad placement %q", f)
		}
		name := role
		mem := func(c int) int { // plain profile's memory slices
			for _, p := range m.MIG.Profiles {
				if p.ComputeSlices == c && !p.MediaExtended() && (c != 1 || p.MemorySlices == 1) {
					return p.MemorySlices
				}
			}
			t.Fatalf("%s: no %dg profile", m.Name, c)
			return 0
		}
		switch role {
		case "1g", "2g", "3g", "4g", "7g":
			c := int(role[0] - '0')
			name = profileNamed(t, m, c, mem(c), false)
		case "1g2":
			name = profileNamed(t, m, 1, 2, false)
		case "1me":
			name = profileNamed(t, m, 1, 1, true)
		case "2me":
			name = profileNamed(t, m, 2, 2, true)
		}
		out = append(out, MIGPlacement{Profile: name, Start: start})
	}
	return out
}

// sevenSliceLayouts are the A100 combinations the MIG User Guide draws
// ("Supported MIG Profiles" figures; the 4g+3g row is valid from R510)
// with their physical starts, and layouts the rules refuse. Every
// 7-compute/8-memory-slice model in the catalog must agree.
var sevenSliceLayouts = []struct {
	layout string
	valid  bool
	why    string // part of the error for an invalid layout
}{
	{"7g@0", true, ""},
	{"4g@0 3g@4", true, ""},
	{"4g@0 2g@4 1g@6", true, ""},
	{"4g@0 1g@4 1g@5 1g@6", true, ""},
	{"3g@0 3g@4", true, ""},
	{"3g@0 2g@4 1g@6", true, ""},
	{"3g@0 1g@4 1g@5 1g@6", true, ""},
	{"2g@0 2g@2 3g@4", true, ""},
	{"2g@0 1g@2 1g@3 3g@4", true, ""},
	{"1g@0 1g@1 2g@2 3g@4", true, ""}, // the guide's 3-2-1-1 example
	{"1g@0 1g@1 1g@2 1g@3 3g@4", true, ""},
	{"2g@0 2g@2 2g@4 1g@6", true, ""},
	{"2g@0 2g@2 1g@4 1g@5 1g@6", true, ""},
	{"1g@0 1g@1 1g@2 1g@3 2g@4 1g@6", true, ""}, // the guide's 2-1-1-1-1-1 example
	{"1g@0 1g@1 1g@2 1g@3 1g@4 1g@5 1g@6", true, ""},
	{"1g2@0 1g2@2 1g2@4 1g2@6", true, ""},
	{"1me@0 1g@1 1g@2 1g@3 1g@4 1g@5 1g@6", true, ""},
	{"1g2@0 2g@2 3g@4", true, ""},
	{"3g@4 1g2@0 1g@2 1g@3", true, ""},

	{"3g@2", false, "cannot start at memory slice 2"},
	{"2g@1", false, "cannot start at memory slice 1"},
	{"1g@7", false, "cannot start at memory slice 7"},
	{"4g@4", false, "cannot start at memory slice 4"},
	{"7g@1", false, "cannot start at memory slice 1"},
	{"1g2@1", false, "cannot start at memory slice 1"},
	{"4g@0 2g@2", false, "overlaps memory slices {2,3}"},
	{"3g@0 4g@0", false, "overlaps"},
	{"1g2@0 1g@1", false, "overlaps memory slices {1}"},
	{"7g@0 1g@6", false, "overlaps"},
	{"1me@0 1me@1", false, "media-extension"},
	{"1g@0 1g@0", false, "overlaps memory slices {0}"},
}

func TestMIGLayoutsSevenSlice(t *testing.T) {
	for _, m := range Default().Models() {
		if m.MIG == nil || m.MIG.ComputeSlices != 7 {
			continue
		}
		for _, tc := range sevenSliceLayouts {
			err := m.MIG.CheckLayout(layout(t, m, tc.layout))
			switch {
			case tc.valid && err != nil:
				t.Errorf("%s: %s refused: %v", m.Name, tc.layout, err)
			case !tc.valid && err == nil:
				t.Errorf("%s: %s accepted", m.Name, tc.layout)
			case !tc.valid && !strings.Contains(err.Error(), tc.why):
				t.Errorf("%s: %s: error %q, want it to mention %q", m.Name, tc.layout, err, tc.why)
			}
		}
	}
}

func TestMIGLayoutsA30(t *testing.T) {
	m, _ := Default().Lookup("A30")
	cases := []struct {
		layout string
		valid  bool
	}{
		{"4g@0", true},
		{"2g@0 2g@2", true},
		{"2g@0 1g@2 1g@3", true},
		{"1g@0 1g@1 1g@2 1g@3", true},
		{"1me@0 1g@1 1g@2 1g@3", true},
		{"2me@0 2g@2", true},
		{"2me@0 1g@2 1g@3", true},
		{"2me@0 1me@2", false}, // one set of media engines
		{"2g@1", false},
		{"1g@4", false},
		{"4g@0 1g@0", false},
		{"2g@0 1g@1", false},
	}
	for _, tc := range cases {
		if err := m.MIG.CheckLayout(layout(t, m, tc.layout)); (err == nil) != tc.valid {
			t.Errorf("A30: %s: error %v, want valid %v", tc.layout, err, tc.valid)
		}
	}
}

// TestMIGCreationOrder follows the guide's note on creation order: the
// 3-2-1-1 layout fails when the driver chooses the placements of 1g, 1g
// and 2g first and succeeds with 3g first. With explicit starts any
// order of the same layout is valid; a placement that blocks both 3g
// starts leaves none for it.
func TestMIGCreationOrder(t *testing.T) {
	m, _ := Default().Lookup("A100-40GB")
	s := m.MIG
	target := layout(t, m, "1g@0 1g@1 2g@2 3g@4")
	orders := [][]int{{3, 0, 2, 1}, {0, 1, 2, 3}, {2, 3, 1, 0}}
	for _, order := range orders {
		var used uint32
		for _, k := range order {
			pl := target[k]
			i := s.ProfileIndex(pl.Profile)
			if why := s.CanPlace(used, false, i, pl.Start); why != "" {
				t.Fatalf("order %v: %s: %s", order, pl, why)
			}
			used |= s.SlotMask(i, pl.Start)
		}
	}
	// Where the driver put the guide's failing sequence's instances is not
	// printed; any placement of 1g, 1g, 2g that touches both halves of the
	// GPU blocks 3g, e.g. 1g@6, 1g@4 and 2g@0.
	blocked := layout(t, m, "1g@6 1g@4 2g@0")
	if err := s.CheckLayout(blocked); err != nil {
		t.Fatalf("blocked layout invalid: %v", err)
	}
	var used uint32
	for _, pl := range blocked {
		used |= s.SlotMask(s.ProfileIndex(pl.Profile), pl.Start)
	}
	three := s.ProfileIndex("3g.20gb")
	if starts := s.FreeStarts(used, false, three); len(starts) != 0 {
		t.Errorf("3g.20gb still has starts %v after %v", starts, blocked)
	}
	for _, st := range []int{0, 4} {
		if why := s.CanPlace(used, false, three, st); !strings.Contains(why, "overlaps") {
			t.Errorf("3g.20gb at %d: %q, want an overlap", st, why)
		}
	}
	if err := s.CheckLayout(append(blocked, MIGPlacement{"3g.20gb", 4})); err == nil {
		t.Error("3g.20gb accepted beside 1g@6, 1g@4, 2g@0")
	}
}

func TestMIGLayoutErrors(t *testing.T) {
	m, _ := Default().Lookup("H100-SXM")
	err := m.MIG.CheckLayout([]MIGPlacement{{"1g.5gb", 0}})
	if err == nil || !strings.Contains(err.Error(), `"1g.5gb" is not one of 1g.10gb, 1g.10gb+me, 1g.20gb`) {
		t.Errorf("unknown profile: %v", err)
	}
	var none *MIGSpec
	if err := none.CheckLayout(nil); err == nil {
		t.Error("nil spec accepted a layout")
	}
	if none.ProfileIndex("1g.10gb") != -1 || none.ProfileNames() != nil {
		t.Error("nil spec knows profiles")
	}
	if i := m.MIG.ProfileIndex("1G.10GB+ME"); i < 0 || !m.MIG.Profiles[i].MediaExtended() {
		t.Errorf("ProfileIndex(1G.10GB+ME) = %d", i)
	}
}
