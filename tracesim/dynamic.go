package tracesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/placement"
)

// TimedPod is a trace pod with its life: when it was created and how long
// it ran (deletion_time - creation_time), in seconds, and its QoS class.
type TimedPod struct {
	Pod      placement.Pod
	Arrive   int64
	Duration int64
	QoS      string
	// Gang places this pod, when it asks for more than one GPU, as a gang
	// of one-GPU members (as DynamicConfig.Gangs does for every such pod).
	Gang bool
}

// LoadTimedPods reads a pod list with creation_time and deletion_time.
func LoadTimedPods(path string) ([]TimedPod, error) {
	t, err := readTable(path, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time")
	if err != nil {
		return nil, err
	}
	pods, err := podsFromTable(t)
	if err != nil {
		return nil, err
	}
	out := make([]TimedPod, len(pods))
	for i := range pods {
		c, err := t.int(i, "creation_time", 0, math.MaxInt64/4, false)
		if err != nil {
			return nil, err
		}
		d, err := t.int(i, "deletion_time", 0, math.MaxInt64/4, false)
		if err != nil {
			return nil, err
		}
		if d < c {
			return nil, fmt.Errorf("%s:%d: column deletion_time: %d is before creation_time %d", t.file, t.lines[i], d, c)
		}
		out[i] = TimedPod{Pod: pods[i], Arrive: c, Duration: d - c, QoS: t.str(i, "qos")}
	}
	return out, nil
}

// DynamicConfig is one dynamic replay: pods arrive at their creation time
// (compressed so the cluster is offered Load), run for their duration once
// started, and wait, retried every cycle, while they do not fit.
type DynamicConfig struct {
	Trace  string
	Nodes  *placement.Cluster
	Pods   []TimedPod
	Policy string
	Seed   uint64
	// Tune is the GPU demand of all arrivals as a multiple of cluster
	// GPU capacity, as in the static replay: the trace's pods plus copies
	// drawn from it (each at a random time of the trace's span, with its
	// own duration), or fewer pods when the trace alone asks more. It
	// bounds Load.
	Tune float64
	// Load is the GPU demand offered over the arrival window, as a
	// multiple of cluster GPU capacity: arrival times are divided by the
	// factor that makes it so (see compression); durations are kept. It
	// must be below Tune.
	Load float64
	// Compression, when set, is the factor arrival times are divided by;
	// Load is then ignored.
	Compression float64
	// Period is the simulated time between scheduling cycles, in seconds.
	Period float64
	// Popularity is the share of the trace the typical shapes cover.
	Popularity float64
	// Queues, when set, are the replay's queues and the rule that maps
	// pods to them (by their qos class); nil: every pod in the default
	// queue, as before queues existed.
	Queues *QueueConfig
	// Preemption lets a pod that fits nowhere stop running pods of
	// preemptible queues (the cycle's preempt and reclaim actions): a
	// lower priority in its own queue, or a queue above its guarantee
	// while the pod's queue stays within its own. A stopped pod waits
	// again and restarts from the beginning; the GPU time it had run is
	// counted as lost.
	Preemption bool
	// MinRuntime protects pods that have run less than this, in seconds.
	MinRuntime float64
	// Gangs places every multi-GPU pod as a gang of one-GPU members (its
	// CPU and memory split evenly among them), all or nothing, on any
	// nodes; without it a multi-GPU pod needs all its GPUs on one node.
	Gangs bool
	// Exact replays Pods as they are: no copies and no drops (Tune is not
	// used), pods of equal arrival time in the order given. A test that
	// replays the same pods elsewhere (through the Kubernetes scheduler)
	// needs the arrivals to be its own.
	Exact bool
	// ReservationWait is how long, in seconds, a pod may fail to fit
	// before it reserves nodes that others may only backfill (the
	// scheduler's --reservation-wait; 0: no reservations).
	ReservationWait float64
	// Record keeps every placement and every stop, in the order the core
	// decided them, in DynamicResult.Binds and Stops.
	Record bool
	// TryAll tries every waiting pod at every cycle, as a scheduler whose
	// backoff ends by the next cycle does. Otherwise a cycle leaves out
	// the pods that would fail as they last did (dispatch.Frame.Skip),
	// which, like a backoff, can change which pod reserves nodes.
	TryAll bool
	// MIG, when set, replays the MIG variant of the trace
	// (dynamic_mig.go): Policy then names one of MIGSetups. Queues,
	// Preemption and Gangs are refused with it.
	MIG *MIGVariant
}

// Sample is the cluster at one cycle.
type Sample struct {
	Time         float64 `json:"time_s"`
	AllocatedPct float64 `json:"allocated_pct"`
	Waiting      int     `json:"waiting"`
	// Queues are the same per queue (DynamicResult.Queues' order), with a
	// queue config only.
	Queues []QueueSample `json:"queues,omitempty"`
}

// QueueSample is one queue at one cycle: the share of the cluster's GPU
// capacity its running pods hold (%), and its waiting pods.
type QueueSample struct {
	AllocatedPct float64 `json:"allocated_pct"`
	Waiting      int     `json:"waiting"`
}

// DynamicResult is one dynamic replay's outcome. Times are simulated
// seconds after compression.
type DynamicResult struct {
	Trace  string  `json:"trace"`
	Policy string  `json:"policy"`
	Seed   uint64  `json:"seed"`
	Tune   float64 `json:"tune"`
	Load   float64 `json:"load"`
	// Compression is the factor arrival times were divided by.
	Compression float64 `json:"compression"`
	// Window is the arrival window (the last arrival's time): the replay
	// ends there.
	Window float64 `json:"window_s"`
	Pods   int     `json:"pods"`
	// Started counts the pods that started, during the window or after it
	// (the replay goes on without arrivals until every pod has started);
	// NeverStarted those that could not start even then (nothing left
	// running could make room for them). A pod stopped by preemption
	// counts as started once it started again.
	Started      int `json:"started"`
	NeverStarted int `json:"never_started"`
	// AllocatedPct is GPU compute allocated, time-weighted over the
	// arrival window, as a share of capacity (%).
	AllocatedPct float64 `json:"allocated_pct"`
	Delays
	// Cycles counts the cycles that served a waiting pod (the core cycle
	// that places the pods that named victims is part of its cycle).
	Cycles int `json:"cycles"`
	// Gangs and Preemption say how the replay ran (DynamicConfig).
	Gangs      bool `json:"gangs,omitempty"`
	Preemption bool `json:"preemption,omitempty"`
	// Preemptions and Reclaims count the running pods stopped by
	// priority preemption within a queue and by reclaim across queues;
	// LostGPUHours is the GPU time those runs had used (GPU-hours).
	Preemptions  int     `json:"preemptions,omitempty"`
	Reclaims     int     `json:"reclaims,omitempty"`
	LostGPUHours float64 `json:"lost_gpu_hours,omitempty"`
	// Queues are the same measures per queue, in the config's order, with
	// a queue config only.
	Queues []QueueResult `json:"queues,omitempty"`
	// MIG is set for a replay of the MIG variant.
	MIG    *DynamicMIG `json:"mig,omitempty"`
	Series []Sample    `json:"-"`
	// Binds and Stops are what the core decided, in its order, with
	// DynamicConfig.Record only.
	Binds   []DynamicBind `json:"-"`
	Stops   []DynamicStop `json:"-"`
	Elapsed time.Duration `json:"-"`
}

// DynamicBind is one placement of a recorded replay: at Time, part Part
// of pod Pod (a gang's member; 0 for a pod placed whole) on node Node,
// GPUs by their position on the node.
type DynamicBind struct {
	Time float64
	Pod  string
	Part int
	Node string
	GPUs []int
}

// DynamicStop is one running pod stopped for a preemption, at Time.
type DynamicStop struct {
	Time float64
	Pod  string
}

// Delays are the queueing delays of started pods, seconds: the time each
// waited in all, from its arrival to its last start less the time it ran
// before being stopped.
type Delays struct {
	DelayMean float64 `json:"delay_mean_s"`
	DelayP50  float64 `json:"delay_p50_s"`
	DelayP95  float64 `json:"delay_p95_s"`
	DelayP99  float64 `json:"delay_p99_s"`
}

// QueueResult is one queue's part of a dynamic replay.
type QueueResult struct {
	Queue        string `json:"queue"`
	Pods         int    `json:"pods"`
	Started      int    `json:"started"`
	NeverStarted int    `json:"never_started"`
	// AllocatedPct is the GPU compute the queue's pods held, time-weighted
	// over the arrival window, as a share of the cluster's capacity (%):
	// the queues' shares add up to DynamicResult.AllocatedPct.
	AllocatedPct float64 `json:"allocated_pct"`
	Delays
	// Preemptions and Reclaims count the queue's pods stopped (as
	// victims) by priority preemption and by reclaim; LostGPUHours is the
	// GPU time their stopped runs had used.
	Preemptions  int     `json:"preemptions"`
	Reclaims     int     `json:"reclaims"`
	LostGPUHours float64 `json:"lost_gpu_hours"`
}

// ReplayDynamic runs a dynamic replay through the scheduling cycle
// (package cycle), the same one the front doors use.
func ReplayDynamic(ctx context.Context, cfg DynamicConfig) (*DynamicResult, error) {
	if cfg.Nodes == nil || len(cfg.Pods) == 0 {
		return nil, errors.New("dynamic replay: no nodes or no pods")
	}
	if cfg.Compression < 0 || math.IsNaN(cfg.Compression) {
		return nil, fmt.Errorf("dynamic replay: compression must be > 0 (or 0: from load), got %g", cfg.Compression)
	}
	if cfg.Compression == 0 && (!(cfg.Load > 0) || !(cfg.Load < cfg.Tune)) {
		return nil, fmt.Errorf("dynamic replay: load must be in (0, tune = %g), got %g", cfg.Tune, cfg.Load)
	}
	if !(cfg.Period > 0) {
		return nil, fmt.Errorf("dynamic replay: period must be > 0, got %g", cfg.Period)
	}
	if cfg.MinRuntime < 0 || math.IsNaN(cfg.MinRuntime) {
		return nil, fmt.Errorf("dynamic replay: minimum runtime must be >= 0, got %g", cfg.MinRuntime)
	}
	if cfg.ReservationWait < 0 || math.IsNaN(cfg.ReservationWait) || math.IsInf(cfg.ReservationWait, 1) {
		return nil, fmt.Errorf("dynamic replay: reservation wait must be >= 0 seconds, got %g", cfg.ReservationWait)
	}
	if cfg.Popularity <= 0 || cfg.Popularity > 1 {
		cfg.Popularity = 0.95
	}
	if cfg.MIG != nil {
		if err := checkMIGDynamic(cfg); err != nil {
			return nil, fmt.Errorf("dynamic replay: MIG: %w", err)
		}
	}
	if cfg.Queues != nil {
		if err := cfg.Queues.CheckPods(cfg.Pods); err != nil {
			return nil, fmt.Errorf("dynamic replay %s: %w", cfg.Trace, err)
		}
	}
	start := time.Now()
	var (
		c    *placement.Cluster
		pol  placement.Policy
		mig  *dynMIG
		name string
	)
	if cfg.MIG != nil {
		var err error
		if mig, c, err = newDynMIG(cfg); err != nil {
			return nil, fmt.Errorf("dynamic replay: MIG: %w", err)
		}
		pol, name = mig.pl.pol, cfg.Policy
	} else {
		c = cfg.Nodes.Clone()
		plain := make([]placement.Pod, len(cfg.Pods))
		for i := range cfg.Pods {
			plain[i] = cfg.Pods[i].Pod
		}
		var err error
		if pol, err = placement.New(cfg.Policy, placement.Options{Seed: cfg.Seed, Typical: placement.TypicalShapes(plain, cfg.Popularity), Popularity: cfg.Popularity}); err != nil {
			return nil, fmt.Errorf("dynamic replay: %w", err)
		}
		name = pol.Name()
	}
	capacity := c.TotalGPUMilli()
	if capacity == 0 {
		return nil, errors.New("dynamic replay: the cluster has no GPUs")
	}

	var pods []TimedPod
	if cfg.Exact {
		pods = slices.Clone(cfg.Pods)
		sort.SliceStable(pods, func(i, j int) bool { return pods[i].Arrive < pods[j].Arrive })
	} else {
		pods = TimedArrivals(cfg.Pods, capacity, cfg.Tune, cfg.Seed)
	}
	first := pods[0].Arrive
	k := cfg.Compression
	if k == 0 {
		var err error
		if k, err = compression(pods, capacity, cfg.Load); err != nil {
			return nil, fmt.Errorf("dynamic replay %s: %w", cfg.Trace, err)
		}
	}
	res := &DynamicResult{Trace: cfg.Trace, Policy: name, Seed: cfg.Seed, Tune: cfg.Tune, Load: cfg.Load, Compression: k,
		Window: float64(pods[len(pods)-1].Arrive-first) / k, Pods: len(pods), Gangs: cfg.Gangs, Preemption: cfg.Preemption}
	d, err := newDynReplay(cfg, c, pol, mig, pods, k)
	if err != nil {
		return nil, fmt.Errorf("dynamic replay %s: %w", cfg.Trace, err)
	}
	if err := d.replay(ctx, res); err != nil {
		return nil, fmt.Errorf("dynamic replay %s/%s seed %d: %w", cfg.Trace, cfg.Policy, cfg.Seed, err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// TimedArrivals is the dynamic replay's arrival set, in arrival order: the
// trace's pods, then copies drawn uniformly from it, each arriving at a
// uniformly drawn time of the trace's span with its original's duration,
// until the GPU demand would pass tune x capacityMilli (when the trace
// alone asks more, randomly chosen pods are dropped instead). Pods that
// arrive together keep a seeded random order.
func TimedArrivals(pods []TimedPod, capacityMilli int64, tune float64, seed uint64) []TimedPod {
	rng := rand.New(rand.NewPCG(seed, 0xd1a))
	out := append([]TimedPod(nil), pods...)
	target := int64(tune * float64(capacityMilli))
	var total int64
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, p := range out {
		total += p.Pod.TotalGPUMilli()
		lo, hi = min(lo, p.Arrive), max(hi, p.Arrive)
	}
	for total > target && len(out) > 0 {
		k := rng.IntN(len(out))
		total -= out[k].Pod.TotalGPUMilli()
		out = append(out[:k], out[k+1:]...)
	}
	for len(pods) > 0 {
		p := pods[rng.IntN(len(pods))]
		if total+p.Pod.TotalGPUMilli() > target {
			break
		}
		total += p.Pod.TotalGPUMilli()
		p.Pod.Name += "-copy"
		p.Arrive = lo + rng.Int64N(hi-lo+1)
		out = append(out, p)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	sort.SliceStable(out, func(i, j int) bool { return out[i].Arrive < out[j].Arrive })
	return out
}

// compression returns the factor k that arrival times are divided by so
// that the pods offer load: the GPU time they ask within the arrival window
// W/k (each pod counted up to the window's length, as a pod started in it
// cannot run longer inside it) is load x capacity x W/k. The offered load
// grows with k, so k is found by bisection.
func compression(pods []TimedPod, capacity int64, load float64) (float64, error) {
	span := float64(pods[len(pods)-1].Arrive - pods[0].Arrive)
	if span <= 0 {
		return 0, errors.New("every pod arrives at the same time: nothing to compress")
	}
	offered := func(k float64) float64 {
		w := span / k
		var work float64
		for _, p := range pods {
			work += float64(p.Pod.TotalGPUMilli()) * math.Min(float64(p.Duration), w)
		}
		return work / (float64(capacity) * w)
	}
	lo, hi := 1e-6, 1.0
	for offered(hi) < load {
		if hi *= 2; hi > 1e12 {
			return 0, fmt.Errorf("the trace cannot offer load %g however its arrivals are compressed", load)
		}
	}
	for i := 0; i < 100 && hi-lo > 1e-9*hi; i++ {
		mid := (lo + hi) / 2
		if offered(mid) < load {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// mayFit reports whether p passes the engine's feasibility checks on one
// of the dirty nodes.
func mayFit(c *placement.Cluster, dirty map[int]bool, p *placement.Pod) bool {
	for n := range dirty {
		if _, ok := placement.Explain(&c.Nodes[n], p); ok {
			return true
		}
	}
	return false
}

func delayStats(d []float64) (mean, p50, p95, p99 float64) {
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	s := append([]float64(nil), d...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	q := func(p float64) float64 { return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)] }
	return sum / float64(len(s)), q(0.50), q(0.95), q(0.99)
}

// DynamicTable writes results as a Markdown table, one row per result.
func DynamicTable(rs []*DynamicResult) string {
	var b strings.Builder
	b.WriteString("| trace | policy | seed | tune | load | allocated % (time-weighted) | started | never started | delay mean s | p50 | p95 | p99 | cycles |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.2f | %d | %d | %.0f | %.0f | %.0f | %.0f | %d |\n",
			r.Trace, r.Policy, r.Seed, r.Tune, r.Load, r.AllocatedPct, r.Started, r.NeverStarted, r.DelayMean, r.DelayP50, r.DelayP95, r.DelayP99, r.Cycles)
	}
	return b.String()
}

// DynamicMeans writes the means over seeds of each trace and policy, in
// the order they first appear.
func DynamicMeans(rs []*DynamicResult) string {
	type key struct{ trace, policy string }
	var order []key
	groups := map[key][]*DynamicResult{}
	for _, r := range rs {
		k := key{r.Trace, r.Policy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	b.WriteString("| trace | policy | seeds | allocated % (time-weighted) | never started | delay mean s | p50 | p95 | p99 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		g := groups[k]
		mean := func(f func(*DynamicResult) float64) float64 {
			var s float64
			for _, r := range g {
				s += f(r)
			}
			return s / float64(len(g))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", k.trace, k.policy, len(g),
			mean(func(r *DynamicResult) float64 { return r.AllocatedPct }),
			mean(func(r *DynamicResult) float64 { return float64(r.NeverStarted) }),
			mean(func(r *DynamicResult) float64 { return r.DelayMean }),
			mean(func(r *DynamicResult) float64 { return r.DelayP50 }),
			mean(func(r *DynamicResult) float64 { return r.DelayP95 }),
			mean(func(r *DynamicResult) float64 { return r.DelayP99 }))
	}
	return b.String()
}

// WriteSeriesCSV writes every run's samples: trace, policy, seed, time,
// allocated %, waiting pods.
func WriteSeriesCSV(w io.Writer, rs []*DynamicResult) error {
	if _, err := io.WriteString(w, "trace,policy,seed,time_s,allocated_pct,waiting\n"); err != nil {
		return err
	}
	for _, r := range rs {
		for _, s := range r.Series {
			if _, err := fmt.Fprintf(w, "%s,%s,%d,%.3f,%.4f,%d\n", r.Trace, r.Policy, r.Seed, s.Time, s.AllocatedPct, s.Waiting); err != nil {
				return err
			}
		}
	}
	return nil
}
