package metrics

import (
	"context"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
)

// GPUStat is one GPU's current figures.
type GPUStat struct {
	UUID string
	// UtilizationRatio is the fraction of time a kernel ran, [0, 1].
	UtilizationRatio float64
	MemoryUsedBytes  float64
	MemoryTotalBytes float64
	TemperatureC     float64
	PowerW           float64
}

// GPUStats reads GPU figures.
type GPUStats interface {
	// Source labels every series: "nvml", or "simulated".
	Source() string
	// Stats returns figures for the GPUs it can read; missing GPUs are
	// left out of the per-GPU figures (health and info are still exposed).
	Stats(ctx context.Context) ([]GPUStat, error)
}

// ContainerMemory is what one container uses of one GPU.
type ContainerMemory struct {
	// Key is the allocation key (TESSERA_CONTAINER_ID).
	Key             string
	GPUUUID         string
	MemoryUsedBytes float64
}

// ContainerUsage reports containers' GPU memory use; the node arbiter will
// implement it from the interception library's accounting files.
type ContainerUsage interface {
	Usage(ctx context.Context) ([]ContainerMemory, error)
}

// ContainerCompute is the compute time share the node arbiter gave one
// container on one GPU in its last period, and what it estimated the
// container demanded (thousandths). Measured is true when a utilisation
// meter calibrated the grant (the share was achieved, not only allotted).
type ContainerCompute struct {
	Key         string
	GPUUUID     string
	ShareMilli  int64
	DemandMilli int64
	Measured    bool
	// Use is the container's last closed use window (measured, or
	// simulated on simulated GPUs; Source "" before the first), Idle
	// whether it is an idle holder: the figures the node's GPUUse carries.
	Use  gpuuse.Use
	Idle bool
}

// ComputeShares is implemented by usage sources that also arbitrate
// compute (the node arbiter).
type ComputeShares interface {
	ComputeShares() []ContainerCompute
}

// Node is what the collector reads from the agent.
type Node interface {
	Inventory() inventory.Node
	Allocations() []checkpoint.Entry
}
