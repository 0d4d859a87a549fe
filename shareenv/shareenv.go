package shareenv

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
)

// Variables of the contract.
const (
	// ContainerID keys the workload's accounting file and its arbiter seat
	// (read by the interception library and the NVML meter).
	ContainerID = "TESSERA_CONTAINER_ID"
	// GPUUUIDs lists the workload's GPUs (MIG instances: their own UUIDs),
	// comma-separated, in CUDA ordinal order.
	GPUUUIDs = "TESSERA_GPU_UUIDS"
	// ComputeRequest and ComputeLimit are each GPU's guaranteed and burst
	// compute, in milli of the GPU ("250m").
	ComputeRequest = "TESSERA_COMPUTE_REQUEST"
	ComputeLimit   = "TESSERA_COMPUTE_LIMIT"
	// MemoryRequest and MemoryLimit are each GPU's guaranteed memory and
	// its cap, in MiB ("20480Mi"); the library enforces the cap.
	MemoryRequest = "TESSERA_MEMORY_REQUEST"
	MemoryLimit   = "TESSERA_MEMORY_LIMIT"
	// ShmDir is the folder of the workload's accounting file.
	ShmDir = "TESSERA_SHM_DIR"
	// ArbiterRegion is the node arbiter's compute grant file; unset when no
	// arbiter gates compute.
	ArbiterRegion = "TESSERA_ARBITER_REGION"
	// ArbiterSocket is the node arbiter's socket, where one runs.
	ArbiterSocket = "TESSERA_ARBITER_SOCKET"
	// Oversubscribe is "1" when allocations beyond the memory cap spill to
	// host memory (managed memory), "0" otherwise.
	Oversubscribe = "TESSERA_OVERSUBSCRIBE"
	// ComputeFail is what the library does when the arbiter stops
	// answering: "open" (run ungated) or "closed" (wait).
	ComputeFail = "TESSERA_COMPUTE_FAIL"
	// LogLevel sets the library's logging (error, warn, info, debug); the
	// node never sets it, a user may.
	LogLevel = "TESSERA_LOG_LEVEL"
	// MIGProfiles lists each GPU's MIG profile ("" for a whole GPU or a
	// share), set only when the workload has a MIG instance.
	MIGProfiles = "TESSERA_MIG_PROFILES"
	// MIGParentUUIDs lists the physical GPU of each item of GPUUUIDs, set
	// with MIGProfiles where the node knows them.
	MIGParentUUIDs = "TESSERA_MIG_PARENT_UUIDS"
	// JobID and Queue name a host job and its queue (host mode only).
	JobID = "TESSERA_JOB_ID"
	Queue = "TESSERA_QUEUE"
)

// CUDA variables every workload gets: its devices, in PCI bus order, so that
// CUDA ordinal i, NVML index i and item i of every per-device list are the
// same GPU (docs/enforcement.md).
const (
	CUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"
	CUDADeviceOrder    = "CUDA_DEVICE_ORDER"
	PCIBusOrder        = "PCI_BUS_ID"
)

// Library lists the variables the interception library reads.
func Library() []string {
	return []string{ContainerID, MemoryLimit, ShmDir, ArbiterRegion, Oversubscribe, ComputeFail, LogLevel}
}

// Settings are the parts of the contract that do not come from the shares.
type Settings struct {
	// ContainerID keys the accounting file and the arbiter seat. Required.
	ContainerID string
	// ShmDir is the accounting folder as the workload sees it. Required.
	ShmDir string
	// ArbiterRegion and ArbiterSocket, as the workload sees them; empty
	// when no arbiter runs (the variables are then left out).
	ArbiterRegion, ArbiterSocket string
	// ComputeFail is "open" or "closed"; empty leaves the library's default.
	ComputeFail string
	// Oversubscribe lets allocations spill to host memory.
	Oversubscribe bool
	// MIGParents maps GPU index to the physical GPU's UUID; when set and a
	// share is a MIG instance, MIGParentUUIDs lists them.
	MIGParents map[int]string
}

// Vars returns the variables of a workload holding shares (in any order:
// they are listed by GPU index). Its CUDA_VISIBLE_DEVICES lists the UUIDs
// (empty without shares: the caller says how it hides every GPU).
func Vars(shares []binding.Share, s Settings) map[string]string {
	shares = slices.Clone(shares)
	sort.SliceStable(shares, func(i, j int) bool { return shares[i].Index < shares[j].Index })
	var uuids, req, lim, memReq, memLim, profiles, parents []string
	mig := false
	for _, g := range shares {
		uuids = append(uuids, g.UUID)
		req = append(req, fmt.Sprintf("%dm", g.ComputeMilli))
		lim = append(lim, fmt.Sprintf("%dm", g.ComputeLimitMilli))
		memReq = append(memReq, fmt.Sprintf("%dMi", g.MemoryMiB))
		memLim = append(memLim, fmt.Sprintf("%dMi", g.MemoryLimitMiB))
		profiles = append(profiles, g.MIGProfile)
		parents = append(parents, s.MIGParents[g.Index])
		mig = mig || g.MIGProfile != ""
	}
	visible := strings.Join(uuids, ",")
	v := map[string]string{
		CUDAVisibleDevices: visible,
		CUDADeviceOrder:    PCIBusOrder,
		ContainerID:        s.ContainerID,
		GPUUUIDs:           visible,
		ComputeRequest:     strings.Join(req, ","),
		ComputeLimit:       strings.Join(lim, ","),
		MemoryRequest:      strings.Join(memReq, ","),
		MemoryLimit:        strings.Join(memLim, ","),
		ShmDir:             s.ShmDir,
		Oversubscribe:      "0",
	}
	if s.Oversubscribe {
		v[Oversubscribe] = "1"
	}
	if s.ComputeFail != "" {
		v[ComputeFail] = s.ComputeFail
	}
	if s.ArbiterRegion != "" {
		v[ArbiterRegion] = s.ArbiterRegion
	}
	if s.ArbiterSocket != "" {
		v[ArbiterSocket] = s.ArbiterSocket
	}
	if mig {
		v[MIGProfiles] = strings.Join(profiles, ",")
		if len(s.MIGParents) > 0 {
			v[MIGParentUUIDs] = strings.Join(parents, ",")
		}
	}
	return v
}

// Owned reports whether name is a variable Vars may set, so a value of it
// in the environment a workload starts from never survives (whether or not
// Vars sets it this time). LogLevel is the user's.
func Owned(name string) bool {
	switch name {
	case CUDAVisibleDevices, CUDADeviceOrder, ContainerID, GPUUUIDs, ComputeRequest, ComputeLimit, MemoryRequest, MemoryLimit,
		ShmDir, ArbiterRegion, ArbiterSocket, Oversubscribe, ComputeFail, MIGProfiles, MIGParentUUIDs:
		return true
	}
	return false
}
