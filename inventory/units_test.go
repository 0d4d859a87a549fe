package inventory

import (
	"slices"
	"testing"
)

// TestUnits: whole GPUs, the MIG instances of a GPU in MIG mode, and a GPU
// in MIG mode without instances handed out whole.
func TestUnits(t *testing.T) {
	node := Node{GPUs: []GPU{
		{UUID: "GPU-a", MIGMode: MIGDisabled},
		{UUID: "GPU-b", MIGMode: MIGEnabled, MIGInstances: []MIGInstance{{UUID: "MIG-b1"}, {}, {UUID: "MIG-b2"}}},
		{UUID: "GPU-c", MIGMode: MIGEnabled},
	}}
	if got, want := node.UnitUUIDs(), []string{"GPU-a", "MIG-b1", "MIG-b2", "GPU-c"}; !slices.Equal(got, want) {
		t.Errorf("UnitUUIDs = %v, want %v", got, want)
	}
	want := []Unit{{"GPU-a", 0}, {"MIG-b1", 1}, {"MIG-b2", 1}, {"GPU-c", 2}}
	if got := node.Units(); !slices.Equal(got, want) {
		t.Errorf("Units = %v, want %v", got, want)
	}
}
