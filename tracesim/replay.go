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
	// MIG, when set, replays the MIG variant of the trace (mig.go): Nodes
	// and Pods are the trace's, the variant converts them, and Policy names
	// one of MIGSetups.
	MIG *MIGVariant
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
	// MIG is set for a replay of the MIG variant.
	MIG *MIGResult `json:"mig,omitempty"`
}

// MIGResult is what a replay of the MIG variant adds to its Result. There
// AllocatedPctEnd and the curve count what the placed pods hold (a MIG
// instance its compute slices), ArrivedGPUMilli and FailedGPUMilli what
// the trace's pods ask.
type MIGResult struct {
	// Model is the catalog model every GPU was made.
	Model string `json:"model"`
	// Memory is the assumption on a sharing pod's GPU memory (MIGMemoryShare
	// or MIGMemoryNone).
	Memory string `json:"memory"`
	// AskedPctEnd is the GPU compute the placed pods asked (the trace's
	// gpu_milli), as a share of capacity (%), once every pod has arrived.
	AskedPctEnd float64 `json:"asked_pct_end"`
	// MemoryPctEnd is the GPU memory the placed pods hold, as a share of
	// capacity (%): a MIG instance its memory slices, a fractional or
	// whole-GPU pod its compute share.
	MemoryPctEnd float64 `json:"memory_pct_end"`
	// WholeGPUs is the number of GPUs a static setup made all-7g.
	WholeGPUs int `json:"whole_gpus,omitempty"`
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

// replayRun is what one replay places on: its cluster (a copy), who
// places each arrival, the typical distribution and the name results give
// the policy.
type replayRun struct {
	c       *placement.Cluster
	typical placement.Distribution
	name    string
	pl      placer
	// mig is set for a replay of the MIG variant.
	mig *MIGResult
}

// placer decides where an arrival goes and books it on the cluster.
type placer interface {
	// place returns what the booking holds, the decision (for the
	// breakdown) and an error wrapping placement.ErrNoFit when nothing
	// fits.
	place(c *placement.Cluster, p *placement.Pod) (booking, placement.Decision, error)
}

// booking is what a placed pod holds, in thousandths of a GPU.
type booking struct {
	compute, memory float64
}

// policyPlacer places with a policy, telling it of each arrival first
// when it learns online.
type policyPlacer struct {
	pol placement.Policy
	obs placement.Observer
}

func (pp policyPlacer) place(c *placement.Cluster, p *placement.Pod) (booking, placement.Decision, error) {
	if pp.obs != nil {
		pp.obs.Observe(p)
	}
	d, err := pp.pol.Place(c, p)
	if err != nil {
		return booking{}, d, err
	}
	if err := c.Apply(p, d); err != nil {
		return booking{}, d, fmt.Errorf("policy made an infeasible decision: %w", err)
	}
	m := float64(p.TotalGPUMilli())
	return booking{compute: m, memory: m}, d, nil
}

// newRun builds the replay of cfg's policy on a copy of its cluster.
func newRun(cfg Config) (*replayRun, error) {
	if cfg.MIG != nil {
		return newMIGRun(cfg)
	}
	typical := placement.TypicalShapes(cfg.Pods, cfg.Popularity)
	pol, err := placement.New(cfg.Policy, placement.Options{Seed: cfg.Seed, Typical: typical, Popularity: cfg.Popularity})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	obs, _ := pol.(placement.Observer)
	return &replayRun{c: cfg.Nodes.Clone(), typical: typical, name: pol.Name(), pl: policyPlacer{pol: pol, obs: obs}}, nil
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
	run, err := newRun(cfg)
	if err != nil {
		return nil, err
	}
	c := run.c
	total := c.TotalGPUMilli()
	if total == 0 {
		return nil, errors.New("replay: the cluster has no GPUs")
	}
	arrivals := Arrivals(cfg.Pods, total, cfg.Tune, cfg.Seed)
	meter := placement.NewFragMeter(run.typical)

	buckets := int(math.Round(cfg.Tune*100)) + 2
	sum := make([]float64, buckets)
	cnt := make([]int, buckets)
	frag := make([]float64, buckets)
	fragSet := make([]bool, buckets)
	res := &Result{Trace: cfg.Trace, Policy: run.name, Seed: cfg.Seed, Tune: cfg.Tune, TotalGPUMilli: total, Pods: len(arrivals)}
	var rec *recorder
	if cfg.Breakdown {
		rec = newRecorder(c)
	}
	var allocated, asked, memory float64
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
		held, d, err := run.pl.place(c, p)
		switch {
		case errors.Is(err, placement.ErrNoFit):
			res.FailedPods++
			res.FailedGPUMilli += p.TotalGPUMilli()
		case err != nil:
			return nil, fmt.Errorf("replay %s/%s seed %d: %w", cfg.Trace, cfg.Policy, cfg.Seed, err)
		default:
			allocated += held.compute
			memory += held.memory
			asked += float64(p.TotalGPUMilli())
		}
		if rec != nil {
			rec.arrived(i, p, d, err == nil, arrivedBefore, total)
		}
		b := int(math.Round(100 * float64(res.ArrivedGPUMilli) / float64(total)))
		if b >= buckets {
			b = buckets - 1
		}
		sum[b] += 100 * allocated / float64(total)
		cnt[b]++
		if !fragSet[b] {
			frag[b] = 100 * meter.Cluster(c) / float64(total)
			fragSet[b] = true
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(len(arrivals), len(arrivals))
	}
	res.AllocatedPctEnd = 100 * allocated / float64(total)
	res.Curve = curve(sum, cnt, frag, fragSet, buckets-1)
	if rec != nil {
		res.Breakdown = rec.finish(c, total)
	}
	if run.mig != nil {
		res.MIG = run.mig
		res.MIG.AskedPctEnd = 100 * asked / float64(total)
		res.MIG.MemoryPctEnd = 100 * memory / float64(total)
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
