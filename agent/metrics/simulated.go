package metrics

import (
	"context"
	"math"

	"github.com/tessera-gpu/tessera/request"
)

// Simulated stands in for NVML on hosts without GPUs. Its figures are
// derived from the agent's state, not measured: utilisation is the sum of
// the compute guarantees handed out on the GPU (capped at 1), memory used
// the sum of memory guarantees, temperature and power a linear function of
// that utilisation. Every series it feeds carries source="simulated".
type Simulated struct{ Node Node }

// Source implements GPUStats.
func (Simulated) Source() string { return "simulated" }

// Stats implements GPUStats.
func (s Simulated) Stats(context.Context) ([]GPUStat, error) {
	util := map[string]float64{}
	mem := map[string]float64{}
	for _, e := range s.Node.Allocations() {
		for _, g := range e.GPUs {
			util[g.UUID] += float64(g.ComputeMilli) / request.Whole
			mem[g.UUID] += float64(g.MemoryMiB << 20)
		}
	}
	inv := s.Node.Inventory()
	out := make([]GPUStat, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		u := math.Min(util[g.UUID], 1)
		total := float64(g.MemoryMiB << 20)
		out = append(out, GPUStat{
			UUID: g.UUID, UtilizationRatio: u,
			MemoryUsedBytes: math.Min(mem[g.UUID]+float64(g.MemoryUsedMiB<<20), total), MemoryTotalBytes: total,
			TemperatureC: 30 + 50*u, PowerW: 60 + 540*u,
		})
	}
	return out, nil
}
