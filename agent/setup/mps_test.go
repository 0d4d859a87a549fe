package setup

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
)

// TestMPSUnits: an MPS node runs a daemon for every unit its device plugin
// hands out: whole GPUs, and the MIG instances of a GPU in MIG mode.
func TestMPSUnits(t *testing.T) {
	node := inventory.Node{GPUs: []inventory.GPU{
		{UUID: "GPU-a", MIGMode: inventory.MIGDisabled},
		{UUID: "GPU-b", MIGMode: inventory.MIGEnabled, MIGInstances: []inventory.MIGInstance{{UUID: "MIG-b1"}, {UUID: "MIG-b2"}}},
		{UUID: "GPU-c", MIGMode: inventory.MIGEnabled}, // MIG on, no instances: the whole GPU
	}}
	if got, want := mpsUnits(node), []string{"GPU-a", "MIG-b1", "MIG-b2", "GPU-c"}; !slices.Equal(got, want) {
		t.Errorf("mpsUnits = %v, want %v", got, want)
	}
}
