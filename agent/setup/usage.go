package setup

import (
	"context"

	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/arbiter"
)

// ArbiterUsage feeds the node arbiter's view of containers to the metrics
// collector (memory held, compute shares granted and demanded, use).
type ArbiterUsage struct{ Arbiter *arbiter.Arbiter }

var (
	_ metrics.ContainerUsage = ArbiterUsage{}
	_ metrics.ComputeShares  = ArbiterUsage{}
)

// Usage implements metrics.ContainerUsage.
func (u ArbiterUsage) Usage(ctx context.Context) ([]metrics.ContainerMemory, error) {
	mem, err := u.Arbiter.Memory(ctx)
	out := make([]metrics.ContainerMemory, 0, len(mem))
	for _, m := range mem {
		out = append(out, metrics.ContainerMemory{Key: m.Key, GPUUUID: m.GPU, MemoryUsedBytes: float64(m.Bytes)})
	}
	return out, err
}

// ComputeShares implements metrics.ComputeShares from the arbiter's last step.
func (u ArbiterUsage) ComputeShares() []metrics.ContainerCompute {
	var out []metrics.ContainerCompute
	for _, s := range u.Arbiter.Snapshot() {
		out = append(out, metrics.ContainerCompute{Key: s.Key, GPUUUID: s.GPU, ShareMilli: s.Share, DemandMilli: s.Demand, Measured: s.Measured,
			Use: s.Use, Idle: s.Idle != nil})
	}
	return out
}
