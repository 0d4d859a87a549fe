package inventory

import "fmt"

// Health is a GPU's health as its discovery backend sees it.
type Health string

// Health values.
const (
	Healthy   Health = "Healthy"
	Unhealthy Health = "Unhealthy"
	Unknown   Health = "Unknown"
)

// MIGMode is whether a GPU is partitioned with Multi-Instance GPU.
type MIGMode string

// MIG modes.
const (
	MIGUnsupported MIGMode = "Unsupported"
	MIGDisabled    MIGMode = "Disabled"
	MIGEnabled     MIGMode = "Enabled"
)

// Node is one host and its GPUs.
type Node struct {
	Name string `json:"name"`
	// CPUMilli and MemoryMiB are the host's allocatable CPU and memory (0 when unknown).
	CPUMilli  int64 `json:"cpuMilli,omitempty"`
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Pods is how many pods the host runs at most (Kubernetes' allocatable
	// pods; 0 when unknown: no limit).
	Pods int64 `json:"pods,omitempty"`
	// DriverVersion and CUDAVersion come from the driver ("570.133.20", "12.8").
	DriverVersion string `json:"driverVersion,omitempty"`
	CUDAVersion   string `json:"cudaVersion,omitempty"`
	GPUs          []GPU  `json:"gpus"`
	// Links describe how pairs of GPUs are connected; pairs not listed are
	// connected through the host (SYS) as far as is known.
	Links []Link `json:"links,omitempty"`
	// Source names the discovery backend ("sim", "nvml").
	Source string `json:"source"`
	// MemoryOversubscription reports that the node agent turns its
	// workloads' device allocations into managed memory (tessera agent
	// --oversubscribe), so that their memory limits may add up past the
	// GPUs' memory (the arbiter's exclusive slices keep the working sets
	// from thrashing). Discovery leaves it false; the agent sets it.
	MemoryOversubscription bool `json:"memoryOversubscription,omitempty"`
}

// GPU is one physical accelerator.
type GPU struct {
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
	// Model is the catalog's canonical name, or "" when the catalog does not know the product.
	Model string `json:"model"`
	// Product is the name the device reports ("NVIDIA H200").
	Product           string  `json:"product"`
	Vendor            string  `json:"vendor"`
	MemoryMiB         int64   `json:"memoryMiB"`
	MemoryUsedMiB     int64   `json:"memoryUsedMiB"`
	SMCount           int     `json:"smCount,omitempty"`
	ComputeCapability string  `json:"computeCapability,omitempty"`
	MIGMode           MIGMode `json:"migMode"`
	// MIGInstances are the GPU instances configured when MIGMode is Enabled.
	MIGInstances []MIGInstance `json:"migInstances,omitempty"`
	// MIGManaged marks a GPU in MIG mode whose layout Tessera manages: the
	// operator put it in MIG mode and lets Tessera create an instance at a
	// free start slot when a workload needs one and destroy it when the
	// workload ends (dynamic MIG). Unmanaged MIG GPUs are used as they are
	// (static MIG: only their existing instances). Tessera never switches
	// MIG mode itself.
	MIGManaged bool `json:"migManaged,omitempty"`
	// NUMANode is the host NUMA node the GPU is attached to, -1 when unknown.
	NUMANode int    `json:"numaNode"`
	PCIBusID string `json:"pciBusId,omitempty"`
	Health   Health `json:"health"`
	// HealthReason explains an Unhealthy or Unknown health ("XID 79: fallen off the bus").
	HealthReason string `json:"healthReason,omitempty"`
	// Sharing is how the node agent lets workloads share the GPU (one of
	// the Sharing* constants); "" means not configured, read as shared.
	Sharing string `json:"sharing,omitempty"`
	// AllocatedMilli is the compute share (thousandths) Tessera has granted
	// on this GPU; discovery reports 0, a daemon fills it from its bookings.
	AllocatedMilli int64 `json:"allocatedMilli"`
}

// MIGInstance is one configured MIG GPU instance.
type MIGInstance struct {
	UUID      string `json:"uuid,omitempty"`
	Profile   string `json:"profile"`
	MemoryMiB int64  `json:"memoryMiB"`
	SMCount   int    `json:"smCount,omitempty"`
	// Start is the memory slice the GPU instance starts at (the "Start" of
	// `nvidia-smi mig -lgi`'s Placement column, NVML's
	// nvmlGpuInstancePlacement_t.start); nil when the source did not read
	// it. Its size is the profile's memory slices (catalog). The engine
	// creates nothing on a GPU with an instance whose start is unknown.
	Start *int `json:"start,omitempty"`
	// InUse marks an instance a workload holds; a source that cannot tell
	// leaves it false and the front door sets it from its bookings.
	InUse bool `json:"inUse,omitempty"`
}

// Slot returns a pointer to start, for MIGInstance.Start literals.
func Slot(start int) *int { return &start }

// PCIePath is the closest common PCIe ancestor of two GPUs, named as
// `nvidia-smi topo -m` names it.
type PCIePath string

// PCIe paths, nearest first.
const (
	PCIeSameBoard      PCIePath = "BOARD" // two GPUs on one board
	PCIeSingleSwitch   PCIePath = "PIX"   // at most one PCIe bridge
	PCIeMultipleSwitch PCIePath = "PXB"   // several PCIe bridges, no host bridge
	PCIeHostBridge     PCIePath = "PHB"   // a PCIe host bridge (same CPU)
	PCIeNUMANode       PCIePath = "NODE"  // host bridges within one NUMA node
	PCIeSystem         PCIePath = "SYS"   // across NUMA nodes (SMP interconnect)
)

// Rank orders paths from nearest (0) to farthest; unknown paths rank as SYS.
func (p PCIePath) Rank() int {
	switch p {
	case PCIeSameBoard:
		return 0
	case PCIeSingleSwitch:
		return 1
	case PCIeMultipleSwitch:
		return 2
	case PCIeHostBridge:
		return 3
	case PCIeNUMANode:
		return 4
	default:
		return 5
	}
}

// Valid reports whether p is one of the named paths.
func (p PCIePath) Valid() bool { return p == PCIeSystem || p.Rank() < 5 }

// Link is the connection between two GPUs of a node, by GPU index.
type Link struct {
	A int `json:"a"`
	B int `json:"b"`
	// NVLinks is the number of NVLink lanes directly joining A and B
	// (through an NVSwitch counts too); 0 means none.
	NVLinks int      `json:"nvlinks,omitempty"`
	PCIe    PCIePath `json:"pcie,omitempty"`
}

// LinkBetween returns how GPUs a and b (indexes) are connected. Unlisted
// pairs are reported as connected over SYS without NVLink.
func (n *Node) LinkBetween(a, b int) Link {
	for _, l := range n.Links {
		if (l.A == a && l.B == b) || (l.A == b && l.B == a) {
			return l
		}
	}
	return Link{A: a, B: b, PCIe: PCIeSystem}
}

// GPUByIndex returns the GPU with the given index.
func (n *Node) GPUByIndex(i int) (*GPU, bool) {
	for k := range n.GPUs {
		if n.GPUs[k].Index == i {
			return &n.GPUs[k], true
		}
	}
	return nil, false
}

// Validate checks the internal consistency of a node description: unique GPU
// indexes and UUIDs, non-negative amounts, and links between known GPUs.
func (n *Node) Validate() error {
	if n.Pods < 0 {
		return fmt.Errorf("node %s: pods must be >= 0 (0: no limit), got %d", n.Name, n.Pods)
	}
	idx := map[int]bool{}
	uuids := map[string]bool{}
	for i, g := range n.GPUs {
		if idx[g.Index] {
			return fmt.Errorf("node %s: gpus[%d].index %d is used twice", n.Name, i, g.Index)
		}
		idx[g.Index] = true
		if g.UUID == "" {
			return fmt.Errorf("node %s: gpus[%d].uuid is empty", n.Name, i)
		}
		if uuids[g.UUID] {
			return fmt.Errorf("node %s: gpus[%d].uuid %q is used twice", n.Name, i, g.UUID)
		}
		uuids[g.UUID] = true
		if g.MemoryMiB <= 0 {
			return fmt.Errorf("node %s: gpus[%d].memoryMiB must be > 0, got %d", n.Name, i, g.MemoryMiB)
		}
		if g.MemoryUsedMiB < 0 || g.MemoryUsedMiB > g.MemoryMiB {
			return fmt.Errorf("node %s: gpus[%d].memoryUsedMiB must be in [0, %d], got %d", n.Name, i, g.MemoryMiB, g.MemoryUsedMiB)
		}
		if g.AllocatedMilli < 0 || g.AllocatedMilli > 1000 {
			return fmt.Errorf("node %s: gpus[%d].allocatedMilli must be in [0, 1000], got %d", n.Name, i, g.AllocatedMilli)
		}
		if g.MIGManaged && g.MIGMode != MIGEnabled {
			return fmt.Errorf("node %s: gpus[%d].migManaged must be false when migMode is %s (Tessera never switches MIG mode)", n.Name, i, g.MIGMode)
		}
		if len(g.MIGInstances) > 0 && g.MIGMode != MIGEnabled {
			return fmt.Errorf("node %s: gpus[%d].migInstances must be empty when migMode is %s", n.Name, i, g.MIGMode)
		}
		for k, m := range g.MIGInstances {
			if m.Start != nil && *m.Start < 0 {
				return fmt.Errorf("node %s: gpus[%d].migInstances[%d].start must be >= 0, got %d", n.Name, i, k, *m.Start)
			}
			if m.UUID != "" {
				if uuids[m.UUID] {
					return fmt.Errorf("node %s: gpus[%d].migInstances[%d].uuid %q is used twice", n.Name, i, k, m.UUID)
				}
				uuids[m.UUID] = true
			}
		}
	}
	for i, l := range n.Links {
		if !idx[l.A] || !idx[l.B] || l.A == l.B {
			return fmt.Errorf("node %s: links[%d] joins GPUs %d and %d; both must be distinct GPU indexes of the node", n.Name, i, l.A, l.B)
		}
		if l.NVLinks < 0 {
			return fmt.Errorf("node %s: links[%d].nvlinks must be >= 0, got %d", n.Name, i, l.NVLinks)
		}
		if l.PCIe != "" && !l.PCIe.Valid() {
			return fmt.Errorf("node %s: links[%d].pcie must be one of BOARD, PIX, PXB, PHB, NODE, SYS, got %q", n.Name, i, l.PCIe)
		}
	}
	return nil
}

// Sharing modes a GPU may be configured with (GPU.Sharing).
const (
	SharingShared    = "shared"    // fractions with guarantees and limits
	SharingExclusive = "exclusive" // whole GPUs only
	SharingMIG       = "mig"       // MIG instances
	// SharingMPS is fractions whose compute NVIDIA MPS caps; each
	// container uses one GPU.
	SharingMPS = "mps"
)

// AllowsFractions reports whether a GPU with sharing mode s may be shared
// by fractional requests.
func AllowsFractions(s string) bool { return s == "" || s == SharingShared || s == SharingMPS }
