package placement

import "github.com/tessera-gpu/tessera/catalog"

// The MIG planner: the default policy's hole-waste idea applied to MIG
// slots.
//
// A fractional share leaves a hole that only some later pods can fill; a
// new MIG instance leaves free memory slices in which only some later
// profiles can still be created, and only at their valid starts. For each
// profile q the typical MIG requests ask for, k_q(S) is the most
// instances of q the free slices of layout S can still take (intervals of
// q's size at q's starts, packed greedily from the left, which is optimal
// for intervals of one length; a +me profile at most one, and none once
// the GPU has a +me instance). Placing an instance turns S into S'; the
// compute it forecloses for the typical requests is
//
//	cost(S -> S') = sum over q of  pi(q) * c(q) * (k_q(S) - k_q(S'))
//
// where pi(q) is q's share of the typical MIG requests that may use the
// GPU's model and c(q) its compute slices. The instance's own profile is
// among the q, so every placement costs something; what differs is what
// else it rules out. This is the expected loss of the layouts still
// possible afterwards, in compute slices, weighted by the learned
// distribution: a 1g instance goes where it blocks no 3g or 4g start the
// typical requests need (on an A100 asked for 1g and 4g, slice 4 to 6
// rather than 0), and onto a GPU already split rather than an empty one
// when 7g requests are typical (on an empty GPU it costs the 7g).
//
// A free existing instance costs nothing (its slices are already taken)
// and is always preferred; an instance to create costs at least
// migCreateCost more than one. Without typical MIG requests for a model
// (nothing learned yet, or none asked for it), every profile of the model
// except the +me variants counts equally.
//
// The node's cost is the sum over the GPUs it would take; the cheapest
// node wins, ties to the policy's fixed node order (which packs). Costs
// are exact, not rounded to the integer scale: slot states are few and
// the differences mean something.

// migOpenCost is added for starting an empty GPU.
const migOpenCost = 100

// migCreateCost keeps a free existing instance ahead of creating one at
// equal cost.
const migCreateCost = 1e-9

// migPlan is the planner of one distribution. It caches per model what it
// derives from the model's geometry; a Policy value serves one goroutine,
// and chooseMIG scores on it, so the cache needs no lock.
type migPlan struct {
	dist   Distribution // MIG shapes only, weights summing to 1
	models map[string]*migModel
	last   *migModel // the model asked last: GPUs of a node are alike
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
	// lastName and lastQ remember the last profile looked up.
	lastName string
	lastQ    int
	// memo[q][mask | media<<MemorySlices] is the best new instance of q on
	// that layout, computed on first use.
	memo [][]migMemo
}

type migMemo struct {
	set   bool
	ok    bool
	start int
	cost  float64
}

func newMIGPlan(d Distribution) *migPlan {
	return &migPlan{dist: d, models: map[string]*migModel{}}
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
	var total float64
	for _, t := range pl.dist {
		if !t.Shape.allows(name) {
			continue
		}
		if q := spec.ProfileIndex(t.Shape.MIGProfile); q >= 0 {
			m.weight[q] += t.Weight
			total += t.Weight
		}
	}
	if total == 0 {
		for q, p := range spec.Profiles {
			if !p.MediaExtended() {
				m.weight[q] = 1
				total++
			}
		}
	}
	for q, p := range spec.Profiles {
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
			return migOption{choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
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
		return migOption{choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
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
	return migOption{cost: e.cost, choice: MIGChoice{Start: e.start, Create: true}}, true
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
	before := m.capacity(used, media)
	open := 0.0
	if used == 0 {
		open = migOpenCost
	}
	best := migMemo{set: true}
	for _, st := range m.spec.Profiles[q].Starts {
		if !m.spec.Fits(used, media, q, st) {
			continue
		}
		cost := open + before - m.capacity(used|m.spec.SlotMask(q, st), media || m.me[q]) + migCreateCost
		if !best.ok || cost < best.cost {
			best = migMemo{set: true, ok: true, start: st, cost: cost}
		}
	}
	return best
}
