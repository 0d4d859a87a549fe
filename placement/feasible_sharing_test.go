package placement

import (
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

func TestSharingOf(t *testing.T) {
	gpu := func(sharing string, mig inventory.MIGMode) inventory.GPU {
		return inventory.GPU{Model: "H200", Sharing: sharing, MIGMode: mig}
	}
	for _, tc := range []struct {
		name string
		node inventory.Node
		want NodeSharing
	}{
		{"not configured reads as shared", inventory.Node{GPUs: []inventory.GPU{gpu("", inventory.MIGDisabled)}}, NodeSharing{Fractions: true}},
		{"shared", inventory.Node{GPUs: []inventory.GPU{gpu(inventory.SharingShared, inventory.MIGDisabled)}}, NodeSharing{Fractions: true}},
		{"exclusive", inventory.Node{GPUs: []inventory.GPU{gpu(inventory.SharingExclusive, inventory.MIGDisabled)}}, NodeSharing{}},
		{"mps", inventory.Node{GPUs: []inventory.GPU{gpu(inventory.SharingMPS, inventory.MIGDisabled)}}, NodeSharing{Fractions: true, MPS: true}},
		{"MIG GPUs do not decide", inventory.Node{GPUs: []inventory.GPU{gpu(inventory.SharingMIG, inventory.MIGEnabled), gpu(inventory.SharingExclusive, inventory.MIGDisabled)}}, NodeSharing{}},
		{"only MIG GPUs", inventory.Node{GPUs: []inventory.GPU{gpu("", inventory.MIGEnabled)}}, NodeSharing{}},
		{"oversubscription", inventory.Node{MemoryOversubscription: true, GPUs: []inventory.GPU{gpu("", inventory.MIGDisabled)}}, NodeSharing{Fractions: true, Oversubscribe: true}},
		{"no GPUs", inventory.Node{}, NodeSharing{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SharingOf(&tc.node); got != tc.want {
				t.Errorf("SharingOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSharingFit(t *testing.T) {
	half := request.GPU{Count: 1, ComputeMilli: 500}
	whole := request.GPU{Count: 1, ComputeMilli: request.Whole}
	two := request.GPU{Count: 2, ComputeMilli: request.Whole}
	exclusiveHalf := request.GPU{Count: 1, ComputeMilli: 500, Exclusive: true}
	mig := request.GPU{Count: 1, MIGProfile: "1g.18gb"}
	none := request.GPU{}
	shared := NodeSharing{Fractions: true}
	exclusive := NodeSharing{}
	mps := NodeSharing{Fractions: true, MPS: true}
	ipc := SharingNeeds{SharedIPC: true}
	for _, tc := range []struct {
		name  string
		gpus  []request.GPU
		needs SharingNeeds
		node  NodeSharing
		want  SharingMismatch
	}{
		{"fraction on shared", []request.GPU{half}, SharingNeeds{}, shared, SharingFits},
		{"fraction on exclusive", []request.GPU{half}, SharingNeeds{}, exclusive, WholeGPUsOnly},
		{"exclusive request counts as whole", []request.GPU{exclusiveHalf}, SharingNeeds{}, exclusive, SharingFits},
		{"whole on exclusive", []request.GPU{whole, two}, SharingNeeds{}, exclusive, SharingFits},
		{"second container breaks it", []request.GPU{whole, half}, SharingNeeds{}, exclusive, WholeGPUsOnly},
		{"MIG request is not checked", []request.GPU{mig}, SharingNeeds{}, exclusive, SharingFits},
		{"no GPU is not checked", []request.GPU{none}, SharingNeeds{}, mps, SharingFits},
		{"no requests", nil, SharingNeeds{}, exclusive, SharingFits},
		{"mps one GPU with IPC", []request.GPU{half}, ipc, mps, SharingFits},
		{"mps whole GPU with IPC", []request.GPU{whole}, ipc, mps, SharingFits},
		{"mps two GPUs", []request.GPU{two}, ipc, mps, MPSOneGPU},
		{"mps two GPUs without IPC names the count first", []request.GPU{two}, SharingNeeds{}, mps, MPSOneGPU},
		{"mps without IPC", []request.GPU{half}, SharingNeeds{}, mps, MPSNeedsSharedIPC},
		{"IPC is not needed off MPS", []request.GPU{two}, SharingNeeds{}, shared, SharingFits},
		{"oversubscription refused", []request.GPU{half}, SharingNeeds{Oversubscribe: true}, shared, NeedsOversubscription},
		{"oversubscription before sharing modes", []request.GPU{half}, SharingNeeds{Oversubscribe: true}, exclusive, NeedsOversubscription},
		{"oversubscription offered", []request.GPU{half}, SharingNeeds{Oversubscribe: true}, NodeSharing{Fractions: true, Oversubscribe: true}, SharingFits},
		{"oversubscribing node takes others too", []request.GPU{half}, SharingNeeds{}, NodeSharing{Fractions: true, Oversubscribe: true}, SharingFits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SharingFit(tc.gpus, tc.needs, tc.node); got != tc.want {
				t.Errorf("SharingFit = %d, want %d", got, tc.want)
			}
		})
	}
}
