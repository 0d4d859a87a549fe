package arbiter

import "context"

// Meter measures how much GPU time clients used, the feedback that turns
// launch tokens into time shares. Package arbiter/nvmlmeter implements it
// with NVML per-process utilisation samples, processes mapped to clients
// by cgroup, process tree or environment; the node agent and the host
// daemon use it on real GPUs. Without a Meter every client keeps the
// static rate, and a compute limit caps launch rate, not GPU time.
type Meter interface {
	// Busy returns, for the GPU with uuid, the fraction of the last
	// period during which each client's kernels ran, [0, 1], keyed by
	// client key. Clients it could not measure are absent.
	Busy(ctx context.Context, uuid string, keys []string) (map[string]float64, error)
}
