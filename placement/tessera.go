package placement

import "math"

// Tessera is Tessera's default policy. It uses no more information than
// FGD (the typical-pod distribution, never arrival order or future pods)
// but scores a placement by what it is expected to waste for good, where
// FGD scores the growth of fragmentation against the next typical pod:
//
//   - Wasted holes (tessera_holes.go): the compute a GPU keeps free after
//     the placement is a hole that later pods fill, in turn leaving a
//     smaller hole, until none of the remaining sizes fits. Each hole size
//     has an expected eventual waste, computed once from the distribution;
//     the policy minimises its growth. A 230m pod then goes where it
//     leaves a hole a popular size fills exactly rather than a sliver
//     nothing fills, and a 160m pod goes into the 190m left by an 810m
//     pod.
//   - Stranding (tessera_strand.go): free GPU compute that the node's free
//     CPU (or free host memory) cannot feed, at the CPU (memory) the
//     typical GPU pods ask per unit of GPU, is counted as lost too, so
//     CPU-only and CPU-heavy pods do not drain the CPU of nodes whose
//     GPUs will later need it.
//
// A sharing pod tries each distinct GPU state that fits and keeps the
// cheapest by exact cost (the fullest GPU on equal cost). The node's score
// is the cost on FGD's 0..100 integer scale, ties going to the fixed
// seeded node order (see integerScore).
//
// Scoring only reads the snapshot, the policy's settings and a hole table
// that is either built once per distribution or, where most GPU pods
// share a GPU, built by Place from the snapshot before any node is scored
// (holeSupply); nothing is written while nodes are scored, so they may be
// scored from several goroutines at once.
type Tessera struct {
	ch    chooser
	holes *holeWaste
	// holeSupply, when set, caps the hole table per decision by the holes
	// already in the cluster (see holeSupply.table).
	holeSupply *holeSupply
	// cpuNeed and memNeed are what the typical GPU pods ask of the host
	// per GPU milli (tessera_strand.go); supply is the cluster's.
	cpuNeed, memNeed hostNeed
	supply           hostSupply
	// hostBound says, for the decision being made, that the workload asks
	// more CPU or more memory per GPU than the cluster has.
	hostBound bool
	// HoleWeight weighs the growth of expected hole waste; CPUWeight and
	// MemoryWeight weigh stranded GPU compute (by CPU, by memory). All are
	// in GPU milli.
	HoleWeight, CPUWeight, MemoryWeight float64
	// migPlan places MIG requests (migplanner.go) unless migFirstFit.
	cuts        *scoreCuts
	migPlan     *migPlan
	migFirstFit bool
	// gen counts the distributions set; lastTable is the last hole table
	// built by Place, kept while the next ones come out equal (both name
	// the inputs of a decision's scores: tesseraEpoch).
	gen       uint64
	lastTable *holeWaste
	// dist is the distribution set last (TypicalOf).
	dist Distribution
}

// tesseraEpoch names everything a Tessera score reads besides the node
// and the pod, so that the class chooser may remember scores while it is
// the same (classmemo.go).
type tesseraEpoch struct {
	gen               uint64
	hostBound         bool
	hole, cpu, memory float64
	table             *holeWaste
}

// Default weights, chosen on the openb traces (seeds 42-45; see
// docs/simulator.md): the hole weight sets the cost's scale on the integer
// score (2 gains 0.02 point on default and loses 0.4 on gpushare100);
// stranding weights from 0.5 to 2 land within 0.03 point of each other.
const (
	DefaultHoleWeight   = 1
	DefaultCPUWeight    = 1
	DefaultMemoryWeight = 1
)

// NewTessera returns the default policy against distribution d.
func NewTessera(d Distribution, seed uint64) *Tessera {
	t := &Tessera{ch: withClasses(newChooser(seed), false), cuts: newScoreCuts(), HoleWeight: DefaultHoleWeight, CPUWeight: DefaultCPUWeight, MemoryWeight: DefaultMemoryWeight}
	t.setDistribution(d)
	return t
}

// setDistribution rebuilds what the policy derives from the typical pods.
// It must not run while Place does (the online wrappers call it between
// arrivals).
func (t *Tessera) setDistribution(d Distribution) {
	t.gen++
	t.lastTable, t.dist = nil, d
	d, migDist := d.split()
	t.migPlan = newMIGPlan(migDist).withWorkload(t.dist)
	if !t.migFirstFit {
		t.ch.mig = t.migPlan
	}
	f := fillable(d)
	t.holes = newHoleWaste(d, f)
	t.holeSupply = newHoleSupply(d, f)
	if t.holeSupply == nil {
		t.holes.contestFreeGPU()
	}
	t.cpuNeed, t.memNeed = hostNeeds(d)
}

// Name implements Policy.
func (*Tessera) Name() string { return "tessera" }

// Place implements Policy.
func (t *Tessera) Place(c *Cluster, p *Pod) (Decision, error) {
	cpu, mem := t.supply.of(c)
	t.hostBound = t.cpuNeed.demand > cpu || t.memNeed.demand > mem
	epoch := tesseraEpoch{gen: t.gen, hostBound: t.hostBound, hole: t.HoleWeight, cpu: t.CPUWeight, memory: t.MemoryWeight, table: t.holes}
	if t.holeSupply == nil || !p.Sharing() || t.HoleWeight == 0 {
		t.ch.memo = memoKey{on: true, epoch: epoch}
		return t.ch.choose(c, p, t.score)
	}
	w := t.holeSupply.table(c, t.ch.classes(c))
	if t.lastTable != nil && *w == *t.lastTable {
		w = t.lastTable // the same scores: the remembered ones hold
	}
	t.lastTable, epoch.table = w, w
	t.ch.memo = memoKey{on: true, epoch: epoch}
	return t.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		return t.scoreWith(w, c, ni, p, usable)
	})
}

// cost is the growth of expected hole waste plus weighted stranding if p
// takes gpus on n, in GPU milli.
func (t *Tessera) cost(holes *holeWaste, n *Node, p *Pod, gpus []int) float64 {
	var c float64
	if t.HoleWeight != 0 {
		var h float64
		for _, i := range gpus {
			g := &n.GPUs[i]
			h += holes.at(g.FreeMilli-p.milliOn(g)) - holes.at(g.FreeMilli)
		}
		c += t.HoleWeight * h
	}
	free0 := n.FreeGPUMilli()
	free1 := free0 - int64(len(gpus))*p.MilliPerGPU()
	if n.CPUMilli > 0 {
		c += t.CPUWeight * (t.cpuNeed.stranded(free1, n.FreeCPUMilli-p.CPUMilli, t.hostBound) - t.cpuNeed.stranded(free0, n.FreeCPUMilli, t.hostBound))
	}
	if n.MemoryMiB > 0 {
		c += t.MemoryWeight * (t.memNeed.stranded(free1, n.FreeMemoryMiB-p.MemoryMiB, t.hostBound) - t.memNeed.stranded(free0, n.FreeMemoryMiB, t.hostBound))
	}
	return c
}

// integerScore maps a cost onto the study's 0..100 integer scale (as FGD
// does). The coarse scale is deliberate: near-equal nodes tie and ties go
// to the fixed node order, which packs; comparing exact costs instead
// spreads pods over near-equal nodes (under FGD's measure it loses about 2
// points of allocation on the default trace).
func integerScore(cost float64) float64 {
	return math.Trunc(100 / (1 + math.Exp(cost/1000)))
}

// scoreCuts finds integerScore without an exponential per node: cut[k-1]
// is the highest cost that still scores k (1000 ln(100/k - 1), falling
// with k), so a cost scores the number of cuts at or above it. A cost
// within a hair of a cut, or below the last, is scored by integerScore
// itself, so the two never differ.
type scoreCuts [99]float64

func newScoreCuts() *scoreCuts {
	var c scoreCuts
	for k := 1; k <= len(c); k++ {
		c[k-1] = 1000 * math.Log(100/float64(k)-1)
	}
	return &c
}

// score is integerScore(cost).
func (c *scoreCuts) score(cost float64) float64 {
	lo, hi := 0, len(c) // the first cut below cost is in [lo, hi]
	for lo < hi {
		m := (lo + hi) / 2
		if cost > c[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	const hair = 1e-6
	// At or below the last cut the score is 99, or 100 where the
	// exponential vanishes beside 1: integerScore says which.
	if math.IsNaN(cost) || lo == len(c) || cost-c[lo] < hair || (lo > 0 && c[lo-1]-cost < hair) {
		return integerScore(cost)
	}
	return float64(lo)
}

func (t *Tessera) score(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
	return t.scoreWith(t.holes, c, ni, p, usable)
}

// scoreWith scores node ni against hole table holes (read only).
func (t *Tessera) scoreWith(holes *holeWaste, c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
	n := &c.Nodes[ni]
	if !p.Sharing() {
		gpus := defaultGPUs(n, p, usable)
		return t.cuts.score(t.cost(holes, n, p, gpus)), gpus
	}
	best, bestCost := -1, 0.0
	var seen distinctFree
	var one [1]int
	for _, i := range usable {
		if !seen.first(n.GPUs[i].FreeMilli) {
			continue // same free compute, same cost: keep the first
		}
		one[0] = i
		c := t.cost(holes, n, p, one[:])
		if best < 0 || c < bestCost || (c == bestCost && n.GPUs[i].FreeMilli < n.GPUs[best].FreeMilli) {
			best, bestCost = i, c
		}
	}
	return t.cuts.score(bestCost), oneOf(usable, best)
}

// distinctGPUs is how many distinct free values distinctFree remembers;
// past that every value counts as new (tried again, same result).
const distinctGPUs = 8

// distinctFree remembers the free-compute values already tried on a node.
type distinctFree struct {
	v [distinctGPUs]int64
	n int
}

// first reports whether free was not seen before, and remembers it.
func (d *distinctFree) first(free int64) bool {
	for j := 0; j < d.n; j++ {
		if d.v[j] == free {
			return false
		}
	}
	if d.n < distinctGPUs {
		d.v[d.n] = free
		d.n++
	}
	return true
}

func (x *Tessera) chooserRef() *chooser { return &x.ch }

func (x *Tessera) typical() Distribution { return x.dist }
