package tracesim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tessera-gpu/tessera/placement"
)

// Trace is a named pod list.
type Trace struct {
	Name string
	Pods []placement.Pod
}

// Matrix is a set of replays: every trace x policy x seed on one cluster.
type Matrix struct {
	Nodes      *placement.Cluster
	Traces     []Trace
	Policies   []string
	Seeds      []uint64
	Tune       float64
	Popularity float64
	// Parallel is the number of replays run at once (at least 1).
	Parallel int
	// Breakdown asks every replay for its Result.Breakdown.
	Breakdown bool
	// MIG, when set, replays the MIG variant: Policies then name setups
	// (MIGSetups).
	MIG *MIGVariant
	// Progress, when set, is called with arrivals placed so far over all
	// replays and an estimate of the total.
	Progress func(done, total int64)
}

// Run runs the matrix and returns results in trace, policy, seed order.
// The first error stops the remaining replays.
func (m Matrix) Run(ctx context.Context) ([]*Result, error) {
	type job struct {
		i     int
		trace Trace
		pol   string
		seed  uint64
	}
	var jobs []job
	var total atomic.Int64 // estimated until each run reports its own total
	estimate := func(t Trace) int64 { return int64(float64(len(t.Pods)) * max(m.Tune, 1)) }
	for _, t := range m.Traces {
		for _, p := range m.Policies {
			for _, s := range m.Seeds {
				jobs = append(jobs, job{len(jobs), t, p, s})
				total.Add(estimate(t))
			}
		}
	}
	if len(jobs) == 0 {
		return nil, errors.New("nothing to run: need at least one trace, policy and seed")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]*Result, len(jobs))
	var (
		done     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	work := make(chan job)
	for w := 0; w < max(1, m.Parallel); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				var last int64
				known := false
				r, err := Replay(ctx, Config{
					Trace: j.trace.Name, Nodes: m.Nodes, Pods: j.trace.Pods, Policy: j.pol, Seed: j.seed,
					Tune: m.Tune, Popularity: m.Popularity, Breakdown: m.Breakdown, MIG: m.MIG,
					Progress: func(d, n int) {
						if !known {
							total.Add(int64(n) - estimate(j.trace))
							known = true
						}
						if m.Progress != nil {
							m.Progress(done.Add(int64(d)-last), total.Load())
							last = int64(d)
						}
					},
				})
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				results[j.i] = r
			}
		}()
	}
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulation stopped: %w", err)
	}
	return results, nil
}
