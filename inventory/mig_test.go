package inventory

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
)

func TestMIGLayout(t *testing.T) {
	a100, _ := catalog.Default().Lookup("A100-40GB")
	cases := []struct {
		name      string
		instances []MIGInstance
		ok        bool
		err       string
	}{
		{"empty", nil, true, ""},
		{"valid", []MIGInstance{{Profile: "3g.20gb", Start: Slot(4)}, {Profile: "2g.10gb", Start: Slot(0)}}, true, ""},
		{"unknown start", []MIGInstance{{Profile: "3g.20gb", Start: Slot(4)}, {Profile: "2g.10gb"}}, false, ""},
		{"overlap", []MIGInstance{{Profile: "3g.20gb", Start: Slot(4)}, {Profile: "1g.5gb", Start: Slot(5)}}, false, "overlaps memory slices {5}"},
		{"bad start", []MIGInstance{{Profile: "3g.20gb", Start: Slot(2)}}, false, "cannot start at memory slice 2"},
	}
	for _, tc := range cases {
		g := GPU{UUID: "GPU-x", Model: "A100-40GB", MIGMode: MIGEnabled, MIGInstances: tc.instances}
		layout, ok, err := g.MIGLayout(a100.MIG)
		if ok != tc.ok || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: ok %v err %v; want ok %v err %q", tc.name, ok, err, tc.ok, tc.err)
		}
		if ok && len(layout) != len(tc.instances) {
			t.Errorf("%s: layout %v", tc.name, layout)
		}
		free, fok := g.MIGFreeSlots(a100.MIG)
		if fok != ok {
			t.Errorf("%s: MIGFreeSlots ok %v, MIGLayout ok %v", tc.name, fok, ok)
		}
		if tc.name == "valid" && !slices.Equal(free, []int{2, 3}) {
			t.Errorf("valid: free slots %v, want [2 3]", free)
		}
	}
}
