package placement

import (
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// SharingNeeds is what a workload needs from the way a node shares its
// GPUs, beyond its GPU requests.
type SharingNeeds struct {
	// Oversubscribe: the workload may spill GPU memory to host memory
	// (managed memory), so it runs only where the node oversubscribes.
	Oversubscribe bool
	// SharedIPC: the workload's processes share the host's IPC namespace,
	// which an MPS client needs to reach the node's MPS server (on one
	// host every job does; in a pod it is spec.hostIPC).
	SharedIPC bool
}

// NodeSharing is how a node shares its GPUs, as the sharing rules read it.
type NodeSharing struct {
	// Fractions: some GPU not in MIG mode takes fractional shares
	// (sharing shared, or MPS).
	Fractions bool
	// MPS: the node's GPUs are shared through NVIDIA MPS. Modes are set
	// per node by its agent (MIG GPUs aside), so one MPS GPU says it.
	MPS bool
	// Oversubscribe: the node oversubscribes GPU memory.
	Oversubscribe bool
}

// SharingOf reads n's sharing: its GPUs not in MIG mode decide (a MIG GPU
// takes MIG requests only, which the MIG feasibility unit checks).
func SharingOf(n *inventory.Node) NodeSharing {
	s := NodeSharing{Oversubscribe: n.MemoryOversubscription}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIGMode == inventory.MIGEnabled {
			continue
		}
		s.Fractions = s.Fractions || inventory.AllowsFractions(g.Sharing)
		s.MPS = s.MPS || g.Sharing == inventory.SharingMPS
	}
	return s
}

// SharingMismatch says why a node's sharing cannot take a workload. Front
// doors put it in their own words (the flag, field or key the user set).
type SharingMismatch int

const (
	// SharingFits: nothing in the node's sharing rules the workload out.
	SharingFits SharingMismatch = iota
	// NeedsOversubscription: the workload asks to oversubscribe GPU
	// memory and the node does not.
	NeedsOversubscription
	// WholeGPUsOnly: the node's GPUs are exclusive and a request asks for
	// a fraction.
	WholeGPUsOnly
	// MPSOneGPU: the node shares through MPS and a request asks for more
	// than one GPU; an MPS client reaches one GPU's control daemon.
	MPSOneGPU
	// MPSNeedsSharedIPC: the node shares through MPS and the workload
	// does not share the host's IPC namespace with the MPS server.
	MPSNeedsSharedIPC
)

// SharingFit checks a workload's GPU requests (one per GPU container or
// job) against a node's sharing and returns the first rule it breaks, in
// the order of the constants above. Requests for no GPU and MIG requests
// are not checked here: MIG GPUs answer MIG requests whatever the node's
// other GPUs do.
func SharingFit(gpus []request.GPU, needs SharingNeeds, node NodeSharing) SharingMismatch {
	if needs.Oversubscribe && !node.Oversubscribe {
		return NeedsOversubscription
	}
	for _, g := range gpus {
		if g.Count == 0 || g.MIGProfile != "" {
			continue
		}
		whole := g.Exclusive || g.ComputeMilli >= request.Whole
		switch {
		case !whole && !node.Fractions:
			return WholeGPUsOnly
		case node.MPS && g.Count > 1:
			return MPSOneGPU
		case node.MPS && !needs.SharedIPC:
			return MPSNeedsSharedIPC
		}
	}
	return SharingFits
}
