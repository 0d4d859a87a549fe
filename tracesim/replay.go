package tracesim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tessera-gpu/tessera/placement"
)

// Config is one replay: a trace on a cluster with a policy and a seed.
type Config struct {
	// Trace names the workload in results ("default").
	Trace string
	// Nodes is the empty cluster; the replay works on a copy.
	Nodes *placement.Cluster
	// Pods is the trace, in file order.
	Pods []placement.Pod
	// Policy is a name placement.New knows.
	Policy string
	Seed   uint64
	// Tune is the arrived GPU demand, as a multiple of cluster GPU capacity,
	// at which arrivals stop (the study uses 1.3).
	Tune float64
	// Popularity is the share of the trace the typical shapes cover (0.95).
	Popularity float64
	// Progress, when set, is called now and then with pods placed so far.
	Progress func(done, total int)
	// Breakdown asks for Result.Breakdown (where capacity is left
	// unallocated at the end).
	Breakdown bool
}

// Point is the curve at one percent of arrived GPU demand.
type Point struct {
	ArrivedPct int `json:"arrived_pct"`
	// AllocatedPct is allocated GPU compute as a share of capacity (%),
	// averaged over the arrivals that round to ArrivedPct, as the study's
	// analysis does.
	AllocatedPct float64 `json:"allocated_pct"`
	// FragPct is the cluster's expected fragmentation against the trace's
	// typical pods, as a share of capacity (%), when the arrived demand
	// first reaches ArrivedPct.
	FragPct float64 `json:"frag_pct"`
}

// Result is one replay's outcome.
type Result struct {
	Trace           string  `json:"trace"`
	Policy          string  `json:"policy"`
	Seed            uint64  `json:"seed"`
	Tune            float64 `json:"tune"`
	TotalGPUMilli   int64   `json:"total_gpu_milli"`
	Pods            int     `json:"pods"`
	ArrivedGPUMilli int64   `json:"arrived_gpu_milli"`
	FailedPods      int     `json:"failed_pods"`
	FailedGPUMilli  int64   `json:"failed_gpu_milli"`
	// AllocatedPctEnd is the allocation once every pod has arrived.
	AllocatedPctEnd float64       `json:"allocated_pct_end"`
	Curve           []Point       `json:"curve"`
	Elapsed         time.Duration `json:"elapsed_ns"`
	// Breakdown is set when Config.Breakdown asked for it.
	Breakdown *Breakdown `json:"breakdown,omitempty"`
}

// At returns the curve's allocation at arrived percentage pct (NaN when
// the replay did not reach it).
func (r *Result) At(pct int) float64 {
	if pct < 0 || pct >= len(r.Curve) {
		return math.NaN()
	}
	return r.Curve[pct].AllocatedPct
}

// FailedGPUPct is the GPU demand of dropped pods as a share of the demand
// that arrived (%).
func (r *Result) FailedGPUPct() float64 {
	if r.ArrivedGPUMilli == 0 {
		return 0
	}
	return 100 * float64(r.FailedGPUMilli) / float64(r.ArrivedGPUMilli)
}

// Replay runs one configuration: pods arrive one at a time and are placed
// greedily by the policy; a pod that does not fit is dropped, never
// retried; pods never leave.
func Replay(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Nodes == nil || len(cfg.Nodes.Nodes) == 0 {
		return nil, errors.New("replay: no nodes")
	}
	if cfg.Tune <= 0 {
		return nil, fmt.Errorf("replay: tune must be > 0, got %g", cfg.Tune)
	}
	if cfg.Popularity <= 0 || cfg.Popularity > 1 {
		cfg.Popularity = 0.95
	}
	start := time.Now()
	c := cfg.Nodes.Clone()
	total := c.TotalGPUMilli()
	if total == 0 {
		return nil, errors.New("replay: the cluster has no GPUs")
	}
	typical := placement.TypicalShapes(cfg.Pods, cfg.Popularity)
	pol, err := placement.New(cfg.Policy, placement.Options{Seed: cfg.Seed, Typical: typical, Popularity: cfg.Popularity})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	observer, _ := pol.(placement.Observer)
	arrivals := Arrivals(cfg.Pods, total, cfg.Tune, cfg.Seed)
	meter := placement.NewFragMeter(typical)

	buckets := int(math.Round(cfg.Tune*100)) + 2
	sum := make([]float64, buckets)
	cnt := make([]int, buckets)
	frag := make([]float64, buckets)
	fragSet := make([]bool, buckets)
	res := &Result{Trace: cfg.Trace, Policy: pol.Name(), Seed: cfg.Seed, Tune: cfg.Tune, TotalGPUMilli: total, Pods: len(arrivals)}
	var rec *recorder
	if cfg.Breakdown {
		rec = newRecorder(c)
	}
	var allocated int64
	for i := range arrivals {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("replay %s/%s seed %d: stopped after %d pods: %w", cfg.Trace, cfg.Policy, cfg.Seed, i, err)
			}
			if cfg.Progress != nil {
				cfg.Progress(i, len(arrivals))
			}
		}
		p := &arrivals[i]
		arrivedBefore := res.ArrivedGPUMilli
		res.ArrivedGPUMilli += p.TotalGPUMilli()
		if observer != nil {
			observer.Observe(p)
		}
		d, err := pol.Place(c, p)
		switch {
		case errors.Is(err, placement.ErrNoFit):
			res.FailedPods++
			res.FailedGPUMilli += p.TotalGPUMilli()
		case err != nil:
			return nil, fmt.Errorf("replay %s/%s seed %d: %w", cfg.Trace, cfg.Policy, cfg.Seed, err)
		default:
			if err := c.Apply(p, d); err != nil {
				return nil, fmt.Errorf("replay %s/%s seed %d: policy made an infeasible decision: %w", cfg.Trace, cfg.Policy, cfg.Seed, err)
			}
			allocated += p.TotalGPUMilli()
		}
		if rec != nil {
			rec.arrived(i, p, d, err == nil, arrivedBefore, total)
		}
		b := int(math.Round(100 * float64(res.ArrivedGPUMilli) / float64(total)))
		if b >= buckets {
			b = buckets - 1
		}
		sum[b] += 100 * float64(allocated) / float64(total)
		cnt[b]++
		if !fragSet[b] {
			frag[b] = 100 * meter.Cluster(c) / float64(total)
			fragSet[b] = true
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(len(arrivals), len(arrivals))
	}
	res.AllocatedPctEnd = 100 * float64(allocated) / float64(total)
	res.Curve = curve(sum, cnt, frag, fragSet, buckets-1)
	if rec != nil {
		res.Breakdown = rec.finish(c, total)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// curve averages each bucket; an empty bucket takes the mean of its
// neighbours' arrivals (the study's analysis does the same).
func curve(sum []float64, cnt []int, frag []float64, fragSet []bool, n int) []Point {
	last := 0
	for b := range cnt {
		if cnt[b] > 0 {
			last = b
		}
	}
	out := make([]Point, 0, n)
	prevFrag := 0.0
	for b := 0; b <= last && b < n; b++ {
		s, k := sum[b], cnt[b]
		if k == 0 {
			for _, nb := range []int{b - 1, b + 1} {
				if nb >= 0 && nb < len(cnt) {
					s += sum[nb]
					k += cnt[nb]
				}
			}
		}
		pt := Point{ArrivedPct: b, FragPct: prevFrag}
		if fragSet[b] {
			pt.FragPct = frag[b]
			prevFrag = frag[b]
		}
		if k > 0 {
			pt.AllocatedPct = s / float64(k)
		}
		out = append(out, pt)
	}
	return out
}
