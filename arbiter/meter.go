package arbiter

import "context"

// Meter measures how much GPU time clients used, the feedback that turns
// launch tokens into time shares. The NVML implementation (per-process
// utilisation samples, processes mapped to containers by cgroup) is not
// written yet; without a Meter every client keeps the static rate.
type Meter interface {
	// Busy returns, for the GPU with uuid, the fraction of the last
	// period during which each client's kernels ran, [0, 1], keyed by
	// client key. Clients it could not measure are absent.
	Busy(ctx context.Context, uuid string, keys []string) (map[string]float64, error)
}
