package setup

import (
	"context"

	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/arbiter"
)

// arbiterUsage feeds the node arbiter's view of containers to the metrics
// collector (memory held, compute shares granted and demanded).
type arbiterUsage struct{ a *arbiter.Arbiter }

var (
	_ metrics.ContainerUsage = arbiterUsage{}
	_ metrics.ComputeShares  = arbiterUsage{}
)

// Usage implements metrics.ContainerUsage.
func (u arbiterUsage) Usage(ctx context.Context) ([]metrics.ContainerMemory, error) {
	mem, err := u.a.Memory(ctx)
	out := make([]metrics.ContainerMemory, 0, len(mem))
	for _, m := range mem {
		out = append(out, metrics.ContainerMemory{Key: m.Key, GPUUUID: m.GPU, MemoryUsedBytes: float64(m.Bytes)})
	}
	return out, err
}

// ComputeShares implements metrics.ComputeShares from the arbiter's last step.
func (u arbiterUsage) ComputeShares() []metrics.ContainerCompute {
	var out []metrics.ContainerCompute
	for _, s := range u.a.Snapshot() {
		out = append(out, metrics.ContainerCompute{Key: s.Key, GPUUUID: s.GPU, ShareMilli: s.Share, DemandMilli: s.Demand, Measured: s.Measured,
			Use: s.Use, Idle: s.Idle != nil})
	}
	return out
}
