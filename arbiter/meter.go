package arbiter

import (
	"context"
	"time"
)

// Meter measures how much GPU time clients used, the feedback that turns
// launch tokens into time shares. Package arbiter/nvmlmeter implements it
// with NVML per-process utilisation samples, processes mapped to clients
// by cgroup, process tree or environment; the node agent and the host
// daemon use it on real GPUs. Without a Meter every client keeps the
// static rate, and a compute limit caps launch rate, not GPU time.
type Meter interface {
	// Read returns, for the GPU with uuid, the GPU time each client's
	// kernels ran since the previous Read for that GPU, keyed by client
	// key (keys lists the GPU's clients), and the span of time that
	// covers. A meter that samples coarsely (NVML: one tick every
	// ~200 ms, each attributed to one process) reports whole sampling
	// ticks: Span is 0 until one ends.
	Read(ctx context.Context, uuid string, keys []string) (Reading, error)
}

// Reading is one measurement of one GPU.
type Reading struct {
	// Span is the time covered: the sampling ticks that ended since the
	// previous reading. 0 means no tick ended and nothing was measured.
	Span time.Duration
	// Busy is the GPU time each client's kernels ran within Span,
	// [0, Span]. With a non-zero Span, a client absent here was measured
	// idle. A single reading may attribute a tick to one client when
	// several ran (NVML does); summed over many ticks it is each
	// client's GPU time.
	Busy map[string]time.Duration
	// Simulated says the figures are derived from a declared load on a
	// simulated GPU, not measured: they fill the clients' use windows
	// (SeatStatus.Use, labelled simulated) and never adjust a launch rate.
	Simulated bool
}
