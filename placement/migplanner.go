package placement

import (
	"math"

	"github.com/tessera-gpu/tessera/catalog"
)

// The MIG planner: the default policy's hole-waste idea applied to MIG
// slots.
//
// A fractional share leaves a hole that only some later pods can fill; a
// new MIG instance leaves free memory slices in which only some later
// profiles can still be created, and only at their valid starts. The
// planner prices a new instance of profile p at start s, turning layout S
// into S', by what it takes from the MIG requests that typically come
// (pi(q): profile q's share of the learned MIG requests that may use the
// GPU's model; c(q): its compute slices), in compute slices:
//
//   - capacity loss: for each q, k_q(S) is the most instances of q the
//     free slices of S can still take at q's starts (a +me profile at most
//     one, none once the GPU has a +me instance);
//     sum over q of pi(q) c(q) (k_q(S) - k_q(S'));
//   - fill loss, the hole-waste recursion over slot layouts: F(S) is the
//     compute the typical requests are expected to place on the GPU from
//     now on, a request of a profile that fits arriving with its share
//     among those that fit and taking its best start, until nothing fits
//     (F = 0); the loss is F(S) - c(p) - F(S'). It sees what the capacity
//     loss cannot: layouts in which each profile still fits alone but not
//     together (after 1g at 4 and 6 an A100 takes a 2g or a 3g, never
//     both).
//
// cost = capacity loss + migFillWeight * fill loss, plus migOpenCost when
// the GPU is empty, so that instances gather on GPUs already split and
// empty GPUs stay whole for 7g requests. On an A100 where 1g and 4g
// requests are typical a 1g goes to slices 4-6, keeping start 0 for the
// 4g; first fit would take slice 0.
//
// A free existing instance costs nothing (its slices are already taken)
// and is always preferred; creating one costs at least migCreateCost
// more. Without typical MIG requests for a model (nothing learned yet, or
// none asked for it), every profile of the model except the +me variants
// counts equally.
//
// The node's cost is the sum over the GPUs it would take plus the growth
// of the slices its host CPU and memory can no longer feed (host
// stranding, below); the cheapest node wins, ties to the policy's fixed
// node order (which packs). Costs
// are exact, not rounded to the integer scale: slot states are few and the
// differences mean something. The best start per model, layout and
// profile, and F per layout, are computed once and remembered.

// migOpenCost is added for starting an empty GPU: more than any
// placement on a GPU already split can cost.
const migOpenCost = 100

// migFillWeight weighs the fill loss against the capacity loss. Chosen on
// the random streams of mig_property_test.go (five mixes, seeds 1-20): 1
// to 3 land within 0.01 of each other in requests placed, 2 gains up to
// 0.012 on 0 (capacity loss alone) and, unlike 0 to 1, builds the guide's
// 3-2-1-1 layout when its requests arrive 1g, 1g, 2g, 3g; 5 loses 13% on
// the 1g-with-3g mix.
const migFillWeight = 2

// migCreateCost keeps a free existing instance ahead of creating one at
// equal cost.
const migCreateCost = 1e-9

// Host stranding: a slice is only usable with the host CPU and memory to
// feed it. The node's usable slices U are the compute its GPUs' layouts
// are expected to still place (F(S) summed over the node's GPUs of the
// request's model, plus free existing instances). A typical MIG request t
// asks cpu(t) and mem(t) of the host for its s(t) compute slices (its
// profile's slices times its GPU count), rc(t) = cpu(t)/s(t) CPU and
// rm(t) = mem(t)/s(t) memory per slice; with free CPU C and memory M a
// node can feed min(U, C/rc(t), M/rm(t)) of its slices to requests like
// t and strands the rest. Drawn as the typical requests come (weighted by
// the slices they ask, v(t) = pi(t) s(t) / sum pi s), the expected
// stranded slices are
//
//	X(U, C, M) = sum over t of v(t) max(0, U - C/rc(t), U - M/rm(t)).
//
// That is the expectation over each request's own need, right when the
// workload is host-bound: it asks more CPU or memory per slice than the
// cluster has (pods without GPUs included), so every node ends near its
// host limits and which requests a node can still take depends on their
// own needs. Otherwise requests that need much find nodes that have
// much, and a node only has to keep the mean needs, mc = sum v(t) rc(t)
// and mm = sum v(t) rm(t): X = max(0, U - C/mc, U - M/mm). This is the default policy's rule for
// shares (tessera_strand.go) in slices. The expectation on a workload
// that is not host-bound charges nearly every node for its heaviest
// requests, so near-equal nodes stop tying and requests leave the
// policy's packing order (on openb it lost 1.1-2.6 points of allocation).
//
// A placement that takes dU usable slices and the pod's CPU and memory
// changes it by X(U-dU, C-cpu, M-mem) - X(U, C, M), added to the
// node's cost with weight 1: a stranded slice is a slice the typical
// requests cannot place, the unit the capacity loss counts. Nothing here
// is fitted; without host needs (no typical request asks CPU or memory)
// the term is 0.

// migHostNeed is one typical MIG request's host need per compute slice
// and its weight v(t).
type migHostNeed struct{ cpu, mem, v float64 }

// migPlan is the planner of one distribution. It caches per model what it
// derives from the model's geometry; a Policy value serves one goroutine,
// and chooseMIG scores on it, so the cache needs no lock.
type migPlan struct {
	dist   Distribution // MIG shapes only, weights summing to 1
	models map[string]*migModel
	last   *migModel // the model asked last: GPUs of a node are alike
	// hostlessCPU and hostlessMem are the CPU and memory the workload's
	// pods without GPUs ask per unit of MIG request weight (withWorkload).
	hostlessCPU, hostlessMem float64
	// supply is the cluster's host supply (prepare).
	supply migSupply
}

// migSupply is a cluster's CPU and memory and its MIG GPUs' compute
// slices per model, remembered for the cluster last seen (by its node
// count and node array: capacities change only when nodes are replaced).
type migSupply struct {
	n        int
	base     *Node
	gen      uint64
	cpu, mem float64
	slices   map[string]float64
}

// migModel is what the planner derives for one GPU model.
type migModel struct {
	name string
	spec *catalog.MIGSpec
	// weight[q] is pi(q) * c(q) for profile q of spec.
	weight []float64
	// fit[q][mask] is k_q for the free slices of mask (media extension
	// free); +me profiles are 0 or 1 and read media separately.
	fit [][]uint8
	// me[q] marks the +me profiles.
	me []bool
	// pi[q] is q's share of the typical MIG requests for the model.
	pi []float64
	// fillMemo[mask | media<<MemorySlices] is fill's value, -1 until
	// computed (a stored v+1 read back as v+1-1 is not v in floating
	// point, and made a decision depend on what was computed before it).
	fillMemo []float64
	// lastName and lastQ remember the last profile looked up.
	lastName string
	lastQ    int
	// memo[q][mask | media<<MemorySlices] is the best new instance of q on
	// that layout, computed on first use.
	memo [][]migMemo
	// host are the typical requests' host needs per slice (host
	// stranding above), equal needs merged, weights summing to 1; nil
	// when none asks CPU or memory. mean is their mean (weight 1).
	host []migHostNeed
	mean migHostNeed
	// demandCPU and demandMem are what the workload asks per slice the
	// MIG requests for the model ask, pods without GPUs included (their
	// share split over the models by MIG request weight).
	demandCPU, demandMem float64
	// boundGen is the supply generation bound was worked out for (0:
	// never); bound says the workload asks more CPU or memory per slice
	// than the cluster has.
	boundGen uint64
	bound    bool
}

type migMemo struct {
	set   bool
	ok    bool
	start int
	cost  float64
	// took is F(S) - F(S'): the usable slices the instance takes.
	took float64
}

func newMIGPlan(d Distribution) *migPlan {
	return &migPlan{dist: d, models: map[string]*migModel{}}
}

// withWorkload reads, from the whole distribution all (weights as
// Typical gives them: each pod shape by its share of the pods), what the
// pods without GPUs ask of the host per unit of MIG request weight, for
// the host-bound test (host stranding). It returns pl.
func (pl *migPlan) withWorkload(all Distribution) *migPlan {
	var mig, cpu, mem float64
	for _, t := range all {
		switch {
		case t.Shape.MIGProfile != "":
			mig += t.Weight
		case t.Shape.GPUCount == 0:
			cpu += t.Weight * float64(t.Shape.CPUMilli)
			mem += t.Weight * t.MemoryMiB
		}
	}
	if mig > 0 {
		pl.hostlessCPU, pl.hostlessMem = cpu/mig, mem/mig
	}
	return pl
}

// model returns the planner's view of a model (nil without geometry).
func (pl *migPlan) model(name string, spec *catalog.MIGSpec) *migModel {
	if spec == nil {
		return nil
	}
	if pl.last != nil && pl.last.spec == spec && pl.last.name == name {
		return pl.last
	}
	if m, ok := pl.models[name]; ok && m.spec == spec {
		pl.last = m
		return m
	}
	np := len(spec.Profiles)
	m := &migModel{name: name, spec: spec, weight: make([]float64, np), fit: make([][]uint8, np), me: make([]bool, np), memo: make([][]migMemo, np)}
	var total, askCPU, askMem, askSlices float64
	for _, t := range pl.dist {
		if !t.Shape.allows(name) {
			continue
		}
		if q := spec.ProfileIndex(t.Shape.MIGProfile); q >= 0 {
			m.weight[q] += t.Weight
			total += t.Weight
			sl := float64(spec.Profiles[q].ComputeSlices * max(1, t.Shape.GPUCount))
			m.addHostNeed(t, sl)
			askCPU += t.Weight * float64(t.Shape.CPUMilli)
			askMem += t.Weight * t.MemoryMiB
			askSlices += t.Weight * sl
		}
	}
	m.normaliseHost()
	if askSlices > 0 {
		m.demandCPU = (askCPU + total*pl.hostlessCPU) / askSlices
		m.demandMem = (askMem + total*pl.hostlessMem) / askSlices
	}
	if total == 0 {
		for q, p := range spec.Profiles {
			if !p.MediaExtended() {
				m.weight[q] = 1
				total++
			}
		}
	}
	m.pi = make([]float64, np)
	m.fillMemo = make([]float64, 2<<spec.MemorySlices)
	for i := range m.fillMemo {
		m.fillMemo[i] = -1
	}
	for q, p := range spec.Profiles {
		m.pi[q] = m.weight[q] / total
		m.memo[q] = make([]migMemo, 2<<spec.MemorySlices)
		m.me[q] = p.MediaExtended()
		m.weight[q] *= float64(p.ComputeSlices) / total
		m.fit[q] = make([]uint8, 1<<spec.MemorySlices)
		for mask := range m.fit[q] {
			m.fit[q][mask] = greedyFit(spec, q, uint32(mask))
		}
	}
	pl.models[name] = m
	pl.last = m
	return m
}

// greedyFit is the most instances of profile q the free slices of used
// can take, ignoring the +me limit (k_q of the planner).
func greedyFit(spec *catalog.MIGSpec, q int, used uint32) uint8 {
	var k uint8
	for _, st := range spec.Profiles[q].Starts {
		if m := spec.SlotMask(q, st); used&m == 0 && st+spec.Profiles[q].MemorySlices <= spec.MemorySlices {
			used |= m
			k++
		}
	}
	return k
}

// capacity is sum over q of weight[q] * k_q(used, media).
func (m *migModel) capacity(used uint32, media bool) float64 {
	var s float64
	for q, w := range m.weight {
		if w == 0 {
			continue
		}
		k := m.fit[q][used]
		if m.me[q] {
			if media {
				k = 0
			}
			k = min(k, 1)
		}
		s += w * float64(k)
	}
	return s
}

// option implements migPlanner.
func (pl *migPlan) option(g *GPU, p *Pod) (migOption, bool) {
	prof := p.GPU.MIGProfile
	if s := &g.migSum; s.ok { // the summary's fast path
		m := pl.model(g.Model, s.spec)
		q := m.profile(prof)
		switch {
		case q < 0:
			return migOption{}, false
		case s.freeQ&(1<<q) != 0:
			in := g.MIG.Instances[g.MIG.freeInstanceQ(q, prof)]
			return migOption{took: float64(m.spec.Profiles[q].ComputeSlices), choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
		case !s.create:
			return migOption{}, false
		}
		return m.option(q, s.used, s.media)
	}
	m := pl.model(g.Model, g.MIG.Spec)
	if m == nil { // no geometry: existing instances only
		if k := g.MIG.freeInstance(prof); k >= 0 {
			in := g.MIG.Instances[k]
			return migOption{choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
		}
		return migOption{}, false
	}
	q := m.profile(prof)
	if q < 0 {
		return migOption{}, false
	}
	if k := g.MIG.freeInstanceQ(q, prof); k >= 0 {
		in := g.MIG.Instances[k]
		return migOption{took: float64(m.spec.Profiles[q].ComputeSlices), choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
	}
	if !g.MIG.Managed {
		return migOption{}, false
	}
	used, media, ok := g.MIG.occupancy()
	if !ok {
		return migOption{}, false
	}
	return m.option(q, used, media)
}

// option is the best new instance of profile q on a layout, memoised.
func (m *migModel) option(q int, used uint32, media bool) (migOption, bool) {
	key := used
	if media {
		key |= 1 << m.spec.MemorySlices
	}
	e := &m.memo[q][key]
	if !e.set {
		*e = m.best(q, used, media)
	}
	if !e.ok {
		return migOption{}, false
	}
	return migOption{cost: e.cost, took: e.took, choice: MIGChoice{Start: e.start, Create: true}}, true
}

// profile is spec.ProfileIndex(name), remembering the last name asked.
func (m *migModel) profile(name string) int {
	if name != m.lastName || m.lastName == "" {
		m.lastName, m.lastQ = name, m.spec.ProfileIndex(name)
	}
	return m.lastQ
}

// best is the cheapest start for a new instance of q on the layout.
func (m *migModel) best(q int, used uint32, media bool) migMemo {
	capBefore, fillBefore := m.capacity(used, media), m.fill(used, media)
	open := 0.0
	if used == 0 {
		open = migOpenCost
	}
	c := float64(m.spec.Profiles[q].ComputeSlices)
	best := migMemo{set: true}
	for _, st := range m.spec.Profiles[q].Starts {
		if !m.spec.Fits(used, media, q, st) {
			continue
		}
		after, afterMedia := used|m.spec.SlotMask(q, st), media || m.me[q]
		fillAfter := m.fill(after, afterMedia)
		cost := open + (capBefore - m.capacity(after, afterMedia)) +
			migFillWeight*(fillBefore-c-fillAfter) + migCreateCost
		if !best.ok || cost < best.cost {
			best = migMemo{set: true, ok: true, start: st, cost: cost, took: fillBefore - fillAfter}
		}
	}
	return best
}

// fill is the compute slices the typical requests are expected to place
// on a GPU with this layout from now on: a request of a profile that fits
// arrives (each with its share among those that fit) and takes its best
// start, until nothing fits.
func (m *migModel) fill(used uint32, media bool) float64 {
	key := used
	if media {
		key |= 1 << m.spec.MemorySlices
	}
	if v := m.fillMemo[key]; v >= 0 {
		return v
	}
	var share, sum float64
	for q, pi := range m.pi {
		if pi == 0 {
			continue
		}
		best := -1.0
		for _, st := range m.spec.Profiles[q].Starts {
			if m.spec.Fits(used, media, q, st) {
				best = max(best, m.fill(used|m.spec.SlotMask(q, st), media || m.me[q]))
			}
		}
		if best >= 0 {
			share += pi
			sum += pi * (float64(m.spec.Profiles[q].ComputeSlices) + best)
		}
	}
	v := 0.0
	if share > 0 {
		v = sum / share
	}
	m.fillMemo[key] = v
	return v
}

// addHostNeed records typical request t, asking slices compute slices,
// among the host needs (weight pi(t) s(t), normalised later).
func (m *migModel) addHostNeed(t Typical, slices float64) {
	if slices <= 0 || t.Weight <= 0 {
		return
	}
	h := migHostNeed{cpu: float64(t.Shape.CPUMilli) / slices, mem: t.MemoryMiB / slices, v: t.Weight * slices}
	for i := range m.host {
		if m.host[i].cpu == h.cpu && m.host[i].mem == h.mem {
			m.host[i].v += h.v
			return
		}
	}
	m.host = append(m.host, h)
}

// normaliseHost scales the host needs' weights to sum to 1, or drops
// them when no request asks CPU or memory.
func (m *migModel) normaliseHost() {
	var total float64
	asks := false
	for _, h := range m.host {
		total += h.v
		asks = asks || h.cpu > 0 || h.mem > 0
	}
	if !asks || total <= 0 {
		m.host = nil
		return
	}
	m.mean = migHostNeed{v: 1}
	for i := range m.host {
		m.host[i].v /= total
		m.mean.cpu += m.host[i].v * m.host[i].cpu
		m.mean.mem += m.host[i].v * m.host[i].mem
	}
}

// stranded is X(U, C, M): the slices of usable that the typical
// requests are expected to find no CPU (cpu, milli) or memory (mem,
// MiB) for, over each request's own needs when bound, at their mean
// need otherwise. A negative cpu or mem counts as 0; an infinite amount
// (the node does not track it) constrains nothing.
func (m *migModel) stranded(usable, cpu, mem float64, bound bool) float64 {
	if usable <= 0 || len(m.host) == 0 {
		return 0
	}
	cpu, mem = max(0, cpu), max(0, mem)
	if !bound {
		return m.mean.unfed(usable, cpu, mem)
	}
	var s float64
	for _, h := range m.host {
		s += h.v * h.unfed(usable, cpu, mem)
	}
	return s
}

// unfed is the slices of usable that cpu and mem cannot feed at h's need.
func (h migHostNeed) unfed(usable, cpu, mem float64) float64 {
	x := 0.0
	if h.cpu > 0 {
		x = max(x, usable-cpu/h.cpu)
	}
	if h.mem > 0 {
		x = max(x, usable-mem/h.mem)
	}
	return x
}

// prepare implements migHostPricer: it works out the supply of c when c
// is not the cluster last seen, and returns its generation.
func (pl *migPlan) prepare(c *Cluster) uint64 {
	if len(c.Nodes) == 0 || (pl.supply.n == len(c.Nodes) && pl.supply.base == &c.Nodes[0]) {
		return pl.supply.gen
	}
	s := migSupply{n: len(c.Nodes), base: &c.Nodes[0], gen: pl.supply.gen + 1, slices: map[string]float64{}}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		s.cpu += float64(n.CPUMilli)
		s.mem += float64(n.MemoryMiB)
		for gi := range n.GPUs {
			if g := &n.GPUs[gi]; g.MIG != nil && g.MIG.Spec != nil {
				s.slices[g.Model] += float64(g.MIG.Spec.ComputeSlices)
			}
		}
	}
	pl.supply = s
	return s.gen
}

// hostBound says whether the workload asks more CPU or more memory per
// slice of the model than the cluster has (remembered per supply).
func (pl *migPlan) hostBound(m *migModel) bool {
	if m.boundGen == pl.supply.gen {
		return m.bound
	}
	m.boundGen, m.bound = pl.supply.gen, false
	if sl := pl.supply.slices[m.name]; sl > 0 {
		m.bound = m.demandCPU > pl.supply.cpu/sl || m.demandMem > pl.supply.mem/sl
	}
	return m.bound
}

// usable is U for one GPU of the model: F of its layout when new
// instances can be made on it, plus its free existing instances' compute
// slices.
func (m *migModel) usable(g *GPU) float64 {
	var u float64
	if s := &g.migSum; s.ok && s.spec == m.spec {
		if s.create {
			u = m.fill(s.used, s.media)
		}
		if s.freeQ == 0 {
			return u // no free instance
		}
	} else if g.MIG.Managed {
		if used, media, known := g.MIG.occupancy(); known {
			u = m.fill(used, media)
		}
	}
	for k := range g.MIG.Instances {
		in := &g.MIG.Instances[k]
		if in.InUse || (in.UUID == "" && in.Start < 0) {
			continue
		}
		if q := in.profileIndex(m.spec); q >= 0 {
			u += float64(m.spec.Profiles[q].ComputeSlices)
		}
	}
	return u
}

// hostCost implements migHostPricer: the growth of the expected stranded
// slices on n when p takes h.took of the usable slices h.usable of its
// GPUs of h.model. It is at least -max(0, h.took): X falls by at most
// one per slice of U and does not fall when the node loses CPU or memory.
// X before the placement depends only on the node, so it is kept in h
// while the node's free CPU and memory and the supply are those it was
// worked out for, and so is the cost for the last CPU and memory asked.
func (pl *migPlan) hostCost(n *Node, p *Pod, h *migNodeHost) float64 {
	m := h.model
	if m == nil {
		return 0
	}
	pl.before(n, h)
	if h.ok && h.askCPU == p.CPUMilli && h.askMem == p.MemoryMiB {
		return h.cost
	}
	cpu, mem := hostFree(n, p.CPUMilli, p.MemoryMiB)
	h.askCPU, h.askMem, h.ok = p.CPUMilli, p.MemoryMiB, true
	h.cost = m.stranded(h.usable-h.took, cpu, mem, h.bound) - h.before
	return h.cost
}

// before brings h.before, X for n's free CPU and memory as they are, up
// to date.
func (pl *migPlan) before(n *Node, h *migNodeHost) {
	if h.gen != pl.supply.gen || h.freeCPU != n.FreeCPUMilli || h.freeMem != n.FreeMemoryMiB {
		h.gen, h.freeCPU, h.freeMem, h.bound = pl.supply.gen, n.FreeCPUMilli, n.FreeMemoryMiB, pl.hostBound(h.model)
		cpu, mem := hostFree(n, 0, 0)
		h.before = h.model.stranded(h.usable, cpu, mem, h.bound)
		h.ok = false
	}
}

// feeds implements migHostPricer: whether n's host feeds every usable
// slice of its GPUs (X before is 0). On such a node the host term of any
// pod is X after the placement, never below 0.
func (pl *migPlan) feeds(n *Node, h *migNodeHost) bool {
	if h.model == nil {
		return true
	}
	pl.before(n, h)
	return h.before == 0
}

// hostFree is n's free CPU and memory less cpu and mem, +Inf for a
// resource the node does not track.
func hostFree(n *Node, cpu, mem int64) (float64, float64) {
	c, m := math.Inf(1), math.Inf(1)
	if n.CPUMilli > 0 {
		c = float64(n.FreeCPUMilli - cpu)
	}
	if n.MemoryMiB > 0 {
		m = float64(n.FreeMemoryMiB - mem)
	}
	return c, m
}

// nodeHost implements migHostPricer: the usable slices of n's GPUs of
// the model of the first GPU in cands (the request's first choice), and
// those the want first of cands take.
func (pl *migPlan) nodeHost(n *Node, cands []migCand, want int) migNodeHost {
	g0 := &n.GPUs[cands[0].gi]
	m := pl.model(g0.Model, g0.MIG.Spec)
	if m == nil || len(m.host) == 0 {
		return migNodeHost{}
	}
	h := migNodeHost{model: m}
	for gi := range n.GPUs {
		if g := &n.GPUs[gi]; g.MIG != nil && g.Model == g0.Model && g.MIG.Spec == m.spec {
			h.usable += m.usable(g)
		}
	}
	for k := 0; k < want; k++ {
		if n.GPUs[cands[k].gi].Model == g0.Model {
			h.took += cands[k].opt.took
		}
	}
	return h
}

// MIGExpectedFill is a model of what slot choice can gain on one GPU: the
// compute slices that requests drawn from the MIG requests of d that may
// use the model (each with its share among those that still fit) are
// expected to place on an empty GPU of that geometry until none fits,
// each new instance at the start the MIG planner chooses, or with
// firstFit at the lowest free start. Without MIG requests for the model
// in d every profile but the +me ones counts alike, as in the planner.
func MIGExpectedFill(d Distribution, model string, spec *catalog.MIGSpec, firstFit bool) float64 {
	if spec == nil {
		return 0
	}
	m := newMIGPlan(d).model(model, spec)
	memo := map[uint32]float64{}
	var fill func(used uint32, media bool) float64
	fill = func(used uint32, media bool) float64 {
		key := used
		if media {
			key |= 1 << spec.MemorySlices
		}
		if v, ok := memo[key]; ok {
			return v
		}
		var share, sum float64
		for q, pi := range m.pi {
			if pi == 0 {
				continue
			}
			st := -1
			if firstFit {
				for _, s := range spec.Profiles[q].Starts {
					if spec.Fits(used, media, q, s) {
						st = s
						break
					}
				}
			} else if o, ok := m.option(q, used, media); ok {
				st = o.choice.Start
			}
			if st < 0 {
				continue
			}
			share += pi
			sum += pi * (float64(spec.Profiles[q].ComputeSlices) + fill(used|spec.SlotMask(q, st), media || m.me[q]))
		}
		v := 0.0
		if share > 0 {
			v = sum / share
		}
		memo[key] = v
		return v
	}
	return fill(0, false)
}
