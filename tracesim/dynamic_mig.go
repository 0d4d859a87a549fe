package tracesim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// The MIG variant of the dynamic replay (docs/simulator.md, "MIG with
// departures").
//
// The arrivals, their times and durations are built from the trace's pods
// as for any dynamic replay, so every setup of a seed sees the same pods
// at the same times. Each setup's cluster, pod mapping and placer are the
// static MIG replay's (newMIGSetup): a pod arrives as the setup places it
// (MIGVariant.Pod), and a cycle serves the waiting pods in arrival order,
// each placed and booked as the static MIG replay places it (migPlacer,
// template matching included, whose instance may be of a larger profile
// than asked). A pod that ends gives back its instance; on a managed GPU
// the instance is destroyed (applyMIG), so the slots come free for any
// profile, and a static layout's instance only comes free for its own.
// Queues, preemption and gangs are not modelled for MIG: one default
// queue serves every pod, as cycle.Run does without queues (a pod that
// fits nowhere does not hold up the others).
//
// What it measures besides the dynamic replay's delays, every quantity
// time-weighted over the arrival window and in % of the cluster's GPU
// compute: held (a MIG instance its compute slices), asked (the trace's
// gpu_milli of the running pods), memory held (its memory slices), the
// waiting pods (mean count), and two kinds of free capacity a request
// cannot use (slotFree): free compute outside the largest instance each
// GPU can still give (slot fragmentation), and free compute on GPUs that
// can no longer give a full-GPU instance (what whole-GPU requests cannot
// use).

// DynamicMIG is what a dynamic replay of the MIG variant adds to its
// result. DynamicResult.AllocatedPct there is HeldPct.
type DynamicMIG struct {
	Model  string `json:"model"`
	Memory string `json:"memory"`
	// HeldPct, AskedPct, MemoryPct: compute held, compute asked (trace
	// gpu_milli) and memory held by the running pods, time-weighted, % of
	// capacity.
	HeldPct   float64 `json:"held_pct"`
	AskedPct  float64 `json:"asked_pct"`
	MemoryPct float64 `json:"memory_pct"`
	// WaitingMean is the mean number of waiting pods, time-weighted;
	// WaitingWholeMean the same of those asking whole GPUs (a full-GPU
	// instance, or under fractional a whole-GPU share).
	WaitingMean      float64 `json:"waiting_mean"`
	WaitingWholeMean float64 `json:"waiting_whole_mean"`
	// FragPct is the free compute outside the largest instance (or, on a
	// GPU not in MIG mode, share) each GPU can still give; NotWholePct the
	// free compute on GPUs that cannot give a full GPU any more;
	// time-weighted, % of capacity.
	FragPct     float64 `json:"frag_pct"`
	NotWholePct float64 `json:"not_whole_pct"`
	// Misfits counts the placements tried that fit nowhere (a request
	// equal to one that fit nowhere in the same cycle is not tried again);
	// NoGPURoom those of them where no node had GPUs that could take the
	// request, whatever its CPU and memory: only those can a better choice
	// of slots (on the same nodes) turn into placements. The others had
	// the GPU room on nodes short of CPU or host memory.
	Misfits   int `json:"misfits"`
	NoGPURoom int `json:"no_gpu_room"`
	// NeverStartedGPUPct is the GPU demand (trace gpu_milli) of the pods
	// that never started, % of the arrived demand.
	NeverStartedGPUPct float64 `json:"never_started_gpu_pct"`
	// WholeGPUs are the GPUs a static setup made all-7g.
	WholeGPUs int `json:"whole_gpus,omitempty"`
}

// dynMIG is a MIG dynamic replay's state: the setup's placer and running
// totals, in thousandths of a GPU.
type dynMIG struct {
	v     *MIGVariant
	pl    *migPlacer
	full  string // the full-GPU profile's name
	res   DynamicMIG
	held  float64
	mem   float64
	asked float64
	// gpuAt[n] is the position of node n's first GPU in frag and whole.
	gpuAt       []int
	frag, whole []float64 // per GPU
	fragSum     float64
	wholeSum    float64
	// integrals over the window
	iHeld, iAsked, iMem, iWait, iWaitWhole, iFrag, iWhole float64
}

// checkMIGDynamic refuses what the MIG dynamic replay does not model.
func checkMIGDynamic(cfg DynamicConfig) error {
	switch {
	case cfg.Queues != nil:
		return errors.New("queues are not modelled with MIG (one default queue serves every pod)")
	case cfg.Preemption:
		return errors.New("preemption is not modelled with MIG")
	case cfg.Gangs:
		return errors.New("gangs are not modelled with MIG (a multi-GPU pod takes one instance on each of its GPUs, on one node)")
	}
	return nil
}

// newDynMIG builds the setup of cfg.Policy for a dynamic replay and maps
// the arrivals as the setup places them.
func newDynMIG(cfg DynamicConfig) (*dynMIG, *placement.Cluster, error) {
	if err := checkMIGDynamic(cfg); err != nil {
		return nil, nil, err
	}
	plain := make([]placement.Pod, len(cfg.Pods))
	for i := range cfg.Pods {
		plain[i] = cfg.Pods[i].Pod
	}
	s, err := newMIGSetup(cfg.MIG, cfg.Policy, cfg.Nodes, plain, cfg.Seed, cfg.Popularity)
	if err != nil {
		return nil, nil, err
	}
	m := &dynMIG{v: cfg.MIG, pl: s.pl, full: cfg.MIG.spec.Profiles[cfg.MIG.seven].Name, res: DynamicMIG{Model: cfg.MIG.model, Memory: cfg.MIG.memory, WholeGPUs: s.wholeGPUs}}
	gpus := 0
	m.gpuAt = make([]int, len(s.c.Nodes))
	for n := range s.c.Nodes {
		m.gpuAt[n] = gpus
		gpus += len(s.c.Nodes[n].GPUs)
	}
	m.frag, m.whole = make([]float64, gpus), make([]float64, gpus)
	for n := range s.c.Nodes {
		m.touch(s.c, n)
	}
	return m, s.c, nil
}

// touch recomputes node n's free capacity that requests cannot use.
func (m *dynMIG) touch(c *placement.Cluster, n int) {
	for k := range c.Nodes[n].GPUs {
		i := m.gpuAt[n] + k
		m.fragSum -= m.frag[i]
		m.wholeSum -= m.whole[i]
		free, largest, whole := slotFree(&c.Nodes[n].GPUs[k])
		m.frag[i] = free - largest
		m.whole[i] = 0
		if !whole {
			m.whole[i] = free
		}
		m.fragSum += m.frag[i]
		m.wholeSum += m.whole[i]
	}
}

// slotFree is a GPU's free compute and the largest instance it can still
// give (a free existing instance, or one it can create now), thousandths
// of a GPU, and whether it can still give a whole GPU. A GPU not in MIG
// mode gives any share of its free compute.
func slotFree(g *placement.GPU) (free, largest float64, whole bool) {
	mg := g.MIG
	if mg == nil {
		return float64(g.FreeMilli), float64(g.FreeMilli), g.FreeMilli == request.Whole
	}
	spec := mg.Spec
	if spec == nil {
		return float64(g.FreeMilli), 0, false
	}
	slice := float64(request.Whole) / float64(spec.ComputeSlices)
	inUse, best := 0, 0
	var used uint32
	media, known := false, true
	for _, in := range mg.Instances {
		q := spec.ProfileIndex(in.Profile)
		if q < 0 || in.Start < 0 {
			known = false
			continue
		}
		p := &spec.Profiles[q]
		used |= spec.SlotMask(q, in.Start)
		media = media || p.MediaExtended()
		if in.InUse {
			inUse += p.ComputeSlices
		} else {
			best = max(best, p.ComputeSlices)
		}
	}
	if mg.Managed && known {
		for q := range spec.Profiles {
			p := &spec.Profiles[q]
			if p.ComputeSlices <= best {
				continue
			}
			for _, st := range p.Starts {
				if spec.Fits(used, media, q, st) {
					best = p.ComputeSlices
					break
				}
			}
		}
	}
	return float64(spec.ComputeSlices-inUse) * slice, float64(best) * slice, best == spec.ComputeSlices
}

// placeAll is a MIG cycle: the pending pods, in arrival order, each placed
// as the setup places it and booked; a pod that fits nowhere waits. A
// request equal to one that fit nowhere this cycle is not tried again (the
// cluster only fills up within a cycle).
func (d *dynReplay) placeAll(pending []int) error {
	m := d.mig
	misfit := map[string]bool{}
	for _, i := range pending {
		p := &d.pods[i]
		q := p.parts[0]
		key := migRequestKey(&q)
		p.tried = true
		if misfit[key] {
			p.status = cycle.NoFit
			continue
		}
		b, dec, booked, err := m.pl.book(d.c, q)
		if errors.Is(err, placement.ErrNoFit) {
			p.status = cycle.NoFit
			misfit[key] = true
			m.res.Misfits++
			if !gpuRoom(d.c, &q) {
				m.res.NoGPURoom++
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("place %s: %w", q.Name, err)
		}
		p.status = cycle.Placed
		p.parts[0] = booked
		p.decisions = []placement.Decision{dec}
		p.held, p.memHeld = b.compute, b.memory
		d.begin(i)
		m.touch(d.c, dec.Node)
	}
	return nil
}

// gpuRoom reports whether some node has GPUs that could take p, whatever
// its CPU and memory: for a MIG request, Count GPUs each with a free
// instance of its profile or, managed, a free valid start for it (under
// template matching this is the profile's own room, which the template
// may refuse); else Count GPUs not in MIG mode with its share free.
func gpuRoom(c *placement.Cluster, p *placement.Pod) bool {
	want := p.GPUCount()
	for ni := range c.Nodes {
		k := 0
		for gi := range c.Nodes[ni].GPUs {
			g := &c.Nodes[ni].GPUs[gi]
			switch {
			case p.MIG() && g.MIG != nil:
				if canTake(g.MIG, p.GPU.MIGProfile) {
					k++
				}
			case !p.MIG() && g.MIG == nil && g.FreeMilli >= p.MilliPerGPU():
				k++
			}
		}
		if k >= want {
			return true
		}
	}
	return false
}

// canTake reports whether a MIG GPU has a free instance of the profile or
// could create one now.
func canTake(mg *placement.MIGGPU, profile string) bool {
	spec := mg.Spec
	if spec == nil {
		return false
	}
	var used uint32
	media := false
	for _, in := range mg.Instances {
		if !in.InUse && strings.EqualFold(in.Profile, profile) {
			return true
		}
		q := spec.ProfileIndex(in.Profile)
		if q < 0 || in.Start < 0 {
			return false // the layout is not fully known: nothing is created
		}
		used |= spec.SlotMask(q, in.Start)
		media = media || spec.Profiles[q].MediaExtended()
	}
	q := spec.ProfileIndex(profile)
	if !mg.Managed || q < 0 {
		return false
	}
	for _, st := range spec.Profiles[q].Starts {
		if spec.Fits(used, media, q, st) {
			return true
		}
	}
	return false
}

// migRequestKey identifies a pod's request for the cycle's misfit memo.
func migRequestKey(p *placement.Pod) string {
	return fmt.Sprintf("%+v/%s/%s", p.GPU, strconv.FormatInt(p.CPUMilli, 10), strconv.FormatInt(p.MemoryMiB, 10))
}

// cycleMIG is a cycle of the MIG dynamic replay: the waiting pods that may
// fit (new, or a node that gained room passes the engine's feasibility
// checks for them), placed in arrival order.
func (d *dynReplay) cycleMIG(res *DynamicResult) error {
	var pending []int
	may := map[string]bool{} // by request: equal requests fit alike
	for _, i := range d.waiting {
		p := &d.pods[i]
		if p.tried && p.status == cycle.NoFit {
			key := migRequestKey(&p.parts[0])
			ok, seen := may[key]
			if !seen {
				ok = d.mayFit(p)
				may[key] = ok
			}
			if !ok {
				continue
			}
		}
		pending = append(pending, i)
	}
	clear(d.dirty)
	if len(pending) == 0 {
		return nil
	}
	res.Cycles++
	if err := d.placeAll(pending); err != nil {
		return err
	}
	kept := d.waiting[:0]
	for _, i := range d.waiting {
		if !d.pods[i].running {
			kept = append(kept, i)
		}
	}
	d.waiting = kept
	return nil
}

// integrate adds span seconds of the current state to the integrals.
func (m *dynMIG) integrate(d *dynReplay, span float64) {
	whole := 0
	for _, i := range d.waiting {
		if p := &d.pods[i]; p.Pod.MilliPerGPU() == request.Whole || p.parts[0].GPU.MIGProfile == m.full {
			whole++
		}
	}
	m.iHeld += m.held * span
	m.iAsked += m.asked * span
	m.iMem += m.mem * span
	m.iWait += float64(len(d.waiting)) * span
	m.iWaitWhole += float64(whole) * span
	m.iFrag += m.fragSum * span
	m.iWhole += m.wholeSum * span
}

// report fills the MIG part of res.
func (m *dynMIG) report(d *dynReplay, res *DynamicResult) {
	r := m.res
	if w := d.window; w > 0 {
		capW := float64(d.capacity) * w
		r.HeldPct, r.AskedPct, r.MemoryPct = 100*m.iHeld/capW, 100*m.iAsked/capW, 100*m.iMem/capW
		r.FragPct, r.NotWholePct = 100*m.iFrag/capW, 100*m.iWhole/capW
		r.WaitingMean, r.WaitingWholeMean = m.iWait/w, m.iWaitWhole/w
	}
	var arrived, never int64
	for i := range d.pods {
		p := &d.pods[i]
		arrived += p.Pod.TotalGPUMilli()
		if !p.started {
			never += p.Pod.TotalGPUMilli()
		}
	}
	if arrived > 0 {
		r.NeverStartedGPUPct = 100 * float64(never) / float64(arrived)
	}
	res.AllocatedPct = r.HeldPct
	res.MIG = &r
}

// DynamicMIGRow is one (trace, model, memory assumption, setup) line of
// the MIG dynamic table: each measure's mean over seeds and standard
// deviation (sample, n-1; 0 for one seed).
type DynamicMIGRow struct {
	Trace, Model, Memory, Setup string
	Seeds                       int
	// Held, Asked, Memory: DynamicMIG's HeldPct, AskedPct, MemoryPct;
	// Waiting its WaitingMean; Frag and NotWhole its FragPct and
	// NotWholePct; NeverStarted the pods, NeverGPU their GPU demand (%);
	// DelayMean and DelayP95 the started pods' delays (s).
	// Misfits and NoGPURoom DynamicMIG's.
	Held, Asked, MemHeld, Waiting, WaitingWhole, Misfits, NoGPURoom, DelayMean, DelayP95, NeverStarted, NeverGPU, Frag, NotWhole Stat
}

// Stat is a mean over seeds and its standard deviation.
type Stat struct{ Mean, SD float64 }

func statOf(v []float64) Stat {
	var s Stat
	for _, x := range v {
		s.Mean += x
	}
	s.Mean /= float64(len(v))
	if len(v) > 1 {
		var ss float64
		for _, x := range v {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(v)-1))
	}
	return s
}

// DynamicMIGRows groups the MIG dynamic results (others are left out) by
// trace, model, memory assumption and setup, in trace, model, memory
// order, then setupOrder.
func DynamicMIGRows(rs []*DynamicResult, setupOrder []string) []DynamicMIGRow {
	type key struct{ t, m, mem, s string }
	groups := map[key][]*DynamicResult{}
	var keys []key
	for _, r := range rs {
		if r.MIG == nil {
			continue
		}
		k := key{r.Trace, r.MIG.Model, r.MIG.Memory, r.Policy}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.m, b.m), cmp.Compare(a.mem, b.mem), cmp.Compare(rankIn(setupOrder, a.s), rankIn(setupOrder, b.s)), cmp.Compare(a.s, b.s))
	})
	rows := make([]DynamicMIGRow, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		of := func(f func(*DynamicResult) float64) Stat {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			return statOf(v)
		}
		rows = append(rows, DynamicMIGRow{Trace: k.t, Model: k.m, Memory: k.mem, Setup: k.s, Seeds: len(g),
			Held:         of(func(r *DynamicResult) float64 { return r.MIG.HeldPct }),
			Asked:        of(func(r *DynamicResult) float64 { return r.MIG.AskedPct }),
			MemHeld:      of(func(r *DynamicResult) float64 { return r.MIG.MemoryPct }),
			Waiting:      of(func(r *DynamicResult) float64 { return r.MIG.WaitingMean }),
			WaitingWhole: of(func(r *DynamicResult) float64 { return r.MIG.WaitingWholeMean }),
			Misfits:      of(func(r *DynamicResult) float64 { return float64(r.MIG.Misfits) }),
			NoGPURoom:    of(func(r *DynamicResult) float64 { return float64(r.MIG.NoGPURoom) }),
			DelayMean:    of(func(r *DynamicResult) float64 { return r.DelayMean }),
			DelayP95:     of(func(r *DynamicResult) float64 { return r.DelayP95 }),
			NeverStarted: of(func(r *DynamicResult) float64 { return float64(r.NeverStarted) }),
			NeverGPU:     of(func(r *DynamicResult) float64 { return r.MIG.NeverStartedGPUPct }),
			Frag:         of(func(r *DynamicResult) float64 { return r.MIG.FragPct }),
			NotWhole:     of(func(r *DynamicResult) float64 { return r.MIG.NotWholePct }),
		})
	}
	return rows
}

// DynamicMIGTable writes the MIG dynamic rows as a Markdown table, each
// figure the mean over seeds ± the standard deviation.
func DynamicMIGTable(rs []*DynamicResult, setupOrder []string) string {
	var b strings.Builder
	b.WriteString("| trace | model | memory | setup | seeds | held % | asked % | memory held % | waiting pods (mean) | of them whole-GPU | delay mean s | delay p95 s | never started | never-started GPU % | slot frag % | free not whole % | tries that fit nowhere | of them with no GPU room |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	pm := func(s Stat, prec int) string { return fmt.Sprintf("%.*f ± %.*f", prec, s.Mean, prec, s.SD) }
	for _, r := range DynamicMIGRows(rs, setupOrder) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Trace, r.Model, r.Memory, r.Setup, r.Seeds, pm(r.Held, 2), pm(r.Asked, 2), pm(r.MemHeld, 2), pm(r.Waiting, 1), pm(r.WaitingWhole, 1),
			pm(r.DelayMean, 1), pm(r.DelayP95, 0), pm(r.NeverStarted, 1), pm(r.NeverGPU, 2), pm(r.Frag, 2), pm(r.NotWhole, 2), pm(r.Misfits, 0), pm(r.NoGPURoom, 0))
	}
	return b.String()
}
