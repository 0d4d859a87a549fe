package arbiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/arbiter/acct"
)

var (
	_ metrics.ContainerUsage = (*Arbiter)(nil)
	_ metrics.ComputeShares  = (*Arbiter)(nil)
)

// ComputeShares implements metrics.ComputeShares from the last step.
func (a *Arbiter) ComputeShares() []metrics.ContainerCompute {
	var out []metrics.ContainerCompute
	for _, s := range a.Snapshot() {
		out = append(out, metrics.ContainerCompute{Key: s.Key, GPUUUID: s.GPU, ShareMilli: s.Share, DemandMilli: s.Demand, Measured: s.Measured})
	}
	return out
}

// Usage implements metrics.ContainerUsage from the library's accounting
// files: the bytes each registered container holds on each of its GPUs.
// A container whose file does not exist yet holds nothing.
func (a *Arbiter) Usage(ctx context.Context) ([]metrics.ContainerMemory, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.clients))
	for k := range a.clients {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []metrics.ContainerMemory
	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		cl := a.clients[k]
		u, err := acct.Read(acct.Path(cl.Dir, k))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("usage of %s: %w", k, err))
			continue
		}
		for _, s := range cl.seats {
			out = append(out, metrics.ContainerMemory{Key: k, GPUUUID: s.share.UUID, MemoryUsedBytes: float64(u.Bytes[s.dev])})
		}
	}
	return out, errors.Join(errs...)
}
