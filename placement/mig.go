package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// MIG in the engine (docs/mig.md).
//
// A GPU in MIG mode (GPU.MIG set) is modelled as its GPU instances
// (profile, start slot, UUID, in use) and the memory slices they leave
// free. It takes MIG requests only: never a fractional share, never a
// whole-GPU request. A MIG request (Pod.GPU.MIGProfile, Count instances,
// one per GPU) is feasible on a GPU of an allowed model that has a free
// existing instance of the profile (static MIG), or, when Tessera manages
// the GPU's layout (MIGGPU.Managed), where the profile can be created at a
// free valid start slot (dynamic MIG; catalog.MIGSpec.CanPlace). Using a
// free existing instance is always preferred to creating one.
//
// Where a new instance goes is chosen by the policy's MIG planner: the
// default policy's (migplanner.go) prices each GPU and start by the
// layouts it leaves for the MIG requests that typically come; every other
// policy, and the default one with Options.MIGFirstFit, takes the first
// fit (first node, first GPU, lowest start).

// MIGGPU is the MIG side of a GPU in MIG mode.
type MIGGPU struct {
	// Model is the catalog model name.
	Model string
	// Spec is the model's MIG geometry (read only, may be shared); nil when
	// the catalog knows none, and then only existing instances are used.
	Spec *catalog.MIGSpec
	// Managed: Tessera may create instances at free start slots (and the
	// node destroys those it created when their workload ends).
	Managed bool
	// Instances are the GPU instances configured now.
	Instances []MIGInstance
}

// MIGInstance is one GPU instance of a MIG GPU.
type MIGInstance struct {
	// Profile is the profile name ("3g.40gb").
	Profile string
	// Start is its first memory slice, -1 when unknown (the GPU's layout
	// then cannot be extended).
	Start int
	// UUID is the MIG device UUID, "" for an instance the engine decided to
	// create that the node has not reported yet.
	UUID string
	// InUse marks an instance a workload holds.
	InUse bool

	// q1 caches 1 + the position of Profile in the GPU's Spec (0: not
	// looked up yet).
	q1 int
}

// profileIndex is the instance's position in spec's profiles, or -1.
func (in *MIGInstance) profileIndex(spec *catalog.MIGSpec) int {
	if in.q1 > 0 && in.q1 <= len(spec.Profiles) && strings.EqualFold(spec.Profiles[in.q1-1].Name, in.Profile) {
		return in.q1 - 1
	}
	return spec.ProfileIndex(in.Profile)
}

// MIGChoice is where one MIG instance of a decision lies on its GPU.
type MIGChoice struct {
	// Start is the instance's start slot (-1 for an existing instance
	// whose start is unknown).
	Start int
	// UUID is the existing instance taken; "" when Create is set.
	UUID string
	// Create: the instance does not exist yet and must be created at Start.
	Create bool
}

func (m *MIGGPU) clone() *MIGGPU {
	if m == nil {
		return nil
	}
	o := *m
	o.Instances = slices.Clone(m.Instances)
	return &o
}

// occupancy is the memory slices the instances hold and whether one is a
// +me instance; known is false when some instance's start is unknown.
func (m *MIGGPU) occupancy() (used uint32, media, known bool) {
	for k := range m.Instances {
		in := &m.Instances[k]
		if in.Start < 0 {
			return 0, false, false
		}
		if m.Spec == nil {
			continue
		}
		i := in.profileIndex(m.Spec)
		if i < 0 {
			return 0, false, false
		}
		used |= m.Spec.SlotMask(i, in.Start)
		media = media || m.Spec.Profiles[i].MediaExtended()
	}
	return used, media, m.Spec != nil
}

// freeInstance returns the position of the first free existing instance of
// profile, or -1.
func (m *MIGGPU) freeInstance(profile string) int {
	for k := range m.Instances {
		in := &m.Instances[k]
		if in.InUse || (in.UUID == "" && in.Start < 0) {
			continue
		}
		if in.q1 > 0 && m.Spec != nil && in.q1 <= len(m.Spec.Profiles) {
			if p := m.Spec.Profiles[in.q1-1].Name; p == profile || strings.EqualFold(p, profile) {
				return k
			}
			continue
		}
		if strings.EqualFold(in.Profile, profile) {
			return k
		}
	}
	return -1
}

// freeInstanceQ is freeInstance for the profile at position q of the
// GPU's Spec (q >= 0), comparing cached positions rather than names.
func (m *MIGGPU) freeInstanceQ(q int, profile string) int {
	for k := range m.Instances {
		in := &m.Instances[k]
		if in.InUse || (in.UUID == "" && in.Start < 0) {
			continue
		}
		if in.q1 > 0 {
			if in.q1-1 == q {
				return k
			}
			continue
		}
		if strings.EqualFold(in.Profile, profile) {
			return k
		}
	}
	return -1
}

// createLayout returns what creating profile needs: the spec's index of
// the profile and the GPU's occupied slices, ok false on an unmanaged GPU,
// one without geometry or one whose layout is not fully known.
func (m *MIGGPU) createLayout(profile string) (q int, used uint32, media, ok bool) {
	if !m.Managed || m.Spec == nil {
		return -1, 0, false, false
	}
	if q = m.Spec.ProfileIndex(profile); q < 0 {
		return -1, 0, false, false
	}
	used, media, known := m.occupancy()
	return q, used, media, known
}

// firstStart returns the lowest start at which profile can be created
// now, or -1.
func (m *MIGGPU) firstStart(profile string) int {
	q, used, media, ok := m.createLayout(profile)
	if !ok {
		return -1
	}
	for _, st := range m.Spec.Profiles[q].Starts {
		if m.Spec.Fits(used, media, q, st) {
			return st
		}
	}
	return -1
}

// profileInfo returns the spec's profile of that name.
func (m *MIGGPU) profileInfo(profile string) (catalog.MIGProfile, bool) {
	if m.Spec == nil {
		return catalog.MIGProfile{}, false
	}
	i := m.Spec.ProfileIndex(profile)
	if i < 0 {
		return catalog.MIGProfile{}, false
	}
	return m.Spec.Profiles[i], true
}

// migSummary is what the MIG chooser reads of a MIG GPU without following
// its pointers: the occupied slices, which profiles have a free instance
// (bit q for profile q of spec) and whether new instances can be made.
type migSummary struct {
	spec  *catalog.MIGSpec
	used  uint32
	freeQ uint32
	media bool
	// create: managed, with geometry and a fully known layout.
	create bool
	ok     bool
}

// migFree sets g's free compute and memory from its instances in use, so
// that cluster totals count MIG bookings: a profile takes its compute
// slices' share of the GPU and its memory. It also refreshes g.migSum.
func migFree(g *GPU) {
	g.migSum = migSummary{}
	if m := g.MIG; m.Spec != nil {
		used, media, known := m.occupancy()
		s := migSummary{spec: m.Spec, used: used, media: media, create: m.Managed && known, ok: true}
		for k := range m.Instances {
			in := &m.Instances[k]
			if in.InUse || (in.UUID == "" && in.Start < 0) {
				continue
			}
			if q := in.profileIndex(m.Spec); q >= 0 && q < 32 {
				s.freeQ |= 1 << q
			} else {
				s.ok = false // a free instance of a profile the spec lacks
			}
		}
		g.migSum = s
	}
	var milli, mem int64
	for _, in := range g.MIG.Instances {
		if !in.InUse {
			continue
		}
		if p, ok := g.MIG.profileInfo(in.Profile); ok {
			milli += int64(p.ComputeSlices) * request.Whole / int64(g.MIG.Spec.ComputeSlices)
			mem += p.MemoryMiB
		} else {
			milli = request.Whole // unknown geometry: one instance in use books the GPU
		}
	}
	g.FreeMilli = max(0, request.Whole-min(milli, request.Whole))
	if g.MemoryMiB > 0 {
		g.FreeMemoryMiB = max(0, g.MemoryMiB-mem)
	}
}

// MIG reports whether the pod asks for MIG instances.
func (p *Pod) MIG() bool { return p.GPU.Count > 0 && p.GPU.MIGProfile != "" }

// migGPUOK reports whether GPU g can take one instance of p's profile.
func migGPUOK(p *Pod, g *GPU) bool {
	if g.MIG == nil || !modelAllowed(p, g.Model) {
		return false
	}
	return g.MIG.freeInstance(p.GPU.MIGProfile) >= 0 || g.MIG.firstStart(p.GPU.MIGProfile) >= 0
}

// migUsable appends the positions of n's GPUs that can take an instance.
func migUsable(dst []int, n *Node, p *Pod) []int {
	for i := range n.GPUs {
		if migGPUOK(p, &n.GPUs[i]) {
			dst = append(dst, i)
		}
	}
	return dst
}

// migLayouts describes the node's MIG GPUs that offer the profile.
func migLayouts(n *Node, p *Pod) string {
	var parts []string
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIG == nil || !modelAllowed(p, g.Model) {
			continue
		}
		var in []string
		for _, x := range g.MIG.Instances {
			s := x.Profile
			if x.Start >= 0 {
				s += fmt.Sprintf("@%d", x.Start)
			}
			if x.InUse {
				s += "*"
			}
			in = append(in, s)
		}
		mode := "static"
		if g.MIG.Managed {
			mode = "managed"
		}
		parts = append(parts, fmt.Sprintf("GPU %d %s [%s]", g.Index, mode, strings.Join(in, " ")))
	}
	return strings.Join(parts, ", ") + "; * in use"
}

// migOption is the best way to put one instance on a GPU under a planner:
// its cost (lower is better) and where.
type migOption struct {
	cost float64
	// took is the usable slices the instance takes (migHostPricer); 0
	// under first fit.
	took   float64
	choice MIGChoice
}

// migPlanner prices the placement of one instance of p on GPU g: ok is
// false when g cannot take it. It must only read g.
type migPlanner interface {
	option(g *GPU, p *Pod) (migOption, bool)
}

// migHostPricer is a planner that also prices a node's host CPU and
// memory (the MIG planner's host stranding, migplanner.go). nodeHost
// reads only the node's GPUs, so a node's offer may remember it;
// hostCost reads its free CPU and memory, and is asked per decision.
type migHostPricer interface {
	prepare(c *Cluster) (gen uint64)
	nodeHost(n *Node, cands []migCand, want int) migNodeHost
	hostCost(n *Node, p *Pod, h *migNodeHost) float64
	// feeds reports whether hostCost is at least 0 for any pod on n
	// (migOrder).
	feeds(n *Node, h *migNodeHost) bool
}

// migNodeHost is what a node's GPUs give the host pricing: the usable
// slices of the GPUs of the chosen model and those the choice takes.
type migNodeHost struct {
	model        *migModel
	usable, took float64
	// before is X(U, C, M) for the node's free CPU and memory and the
	// supply generation it was worked out for (gen 0: not yet); hostCost
	// works it out again when they differ.
	before           float64
	freeCPU, freeMem int64
	gen              uint64
	bound            bool
	// askCPU, askMem and cost are the last pod's ask and its host cost,
	// valid while before is (ok).
	askCPU, askMem int64
	cost           float64
	ok             bool
}

// firstFit takes the first free existing instance, else the lowest free
// start.
type firstFit struct{}

func (firstFit) option(g *GPU, p *Pod) (migOption, bool) {
	if k := g.MIG.freeInstance(p.GPU.MIGProfile); k >= 0 {
		in := g.MIG.Instances[k]
		return migOption{choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
	}
	if st := g.MIG.firstStart(p.GPU.MIGProfile); st >= 0 {
		return migOption{choice: MIGChoice{Start: st, Create: true}}, true
	}
	return migOption{}, false
}

// chooseMIG places a MIG pod: for each node that has the CPU and memory,
// the planner's best option on each GPU; the node's cost is the sum over
// its Count cheapest GPUs, plus, for a planner that prices the host
// (migHostPricer), the growth of the slices its CPU and memory cannot
// feed. The cheapest node wins; ties go to the fixed
// node order when the chooser has one (packing), else to the first node.
// With the first-fit planner the first feasible node wins. What a node's
// GPUs offer depends only on its GPUs, so on a cluster with a change log
// it is remembered until the node changes (migcache.go); the host term
// reads the node's free CPU and memory and is worked out per decision.
func (ch *chooser) chooseMIG(c *Cluster, p *Pod, pl migPlanner) (Decision, error) {
	if pl == nil {
		pl = firstFit{}
	}
	_, first := pl.(firstFit)
	hp, _ := pl.(migHostPricer)
	var gen uint64
	if hp != nil {
		gen = hp.prepare(c)
	}
	want := p.GPUCount()
	memo := ch.migMemo.entries(c, pl, p)
	if ch.rank != nil {
		ch.ranked(c, 0) // the tie order drawn for this cluster before any tie reads it
	}
	// earlier is the fixed node order that decides ties: the chooser's
	// when it has one (packing), else the nodes' own.
	earlier := func(a, b int) bool {
		if ch.rank != nil {
			return ch.rank[a] < ch.rank[b]
		}
		return a < b
	}
	bestNode := -1
	var bestCost float64
	var cands, best []migCand
	// visit prices node ni and keeps it when it beats the best so far: a
	// lower cost, or an equal cost on a node earlier in the fixed order,
	// so that the result does not depend on the order nodes are visited.
	visit := func(ni int) {
		n := &c.Nodes[ni]
		if !okOpen(n, p) || !okCPU(n, p) || !okMemory(n, p) || !okPods(n, p) || len(n.GPUs) < want {
			return
		}
		var cost float64
		var offer *migOffer
		if memo != nil {
			if offer = memo.at(ni, n, p, pl, first, want); !offer.ok {
				return
			}
			cost = offer.cost
			if hp != nil {
				// The host term is at least -took (hostCost): a node
				// that cannot reach the best cost even so (by more than
				// rounding) is passed by.
				if bestNode >= 0 && cost-max(0, offer.host.took) > bestCost+1e-9 {
					return
				}
				if h := &offer.host; h.ok && h.gen == gen && h.askCPU == p.CPUMilli && h.askMem == p.MemoryMiB &&
					h.freeCPU == n.FreeCPUMilli && h.freeMem == n.FreeMemoryMiB {
					cost += h.cost // the last pod's, asking the same of the same node
				} else {
					cost += hp.hostCost(n, p, h)
				}
			}
		} else {
			var ok bool
			if cost, cands, ok = migNodeOption(n, p, pl, first, want, cands[:0]); !ok {
				return
			}
			if hp != nil {
				if bestNode >= 0 {
					var took float64
					for k := 0; k < want; k++ {
						took += max(0, cands[k].opt.took)
					}
					if cost-took > bestCost+1e-9 {
						return // as in the memo's case
					}
				}
				h := hp.nodeHost(n, cands, want)
				cost += hp.hostCost(n, p, &h)
			}
		}
		if bestNode < 0 || cost < bestCost || (cost == bestCost && ch.rank != nil && earlier(ni, bestNode)) ||
			(cost == bestCost && ch.rank == nil && ni < bestNode) {
			bestNode, bestCost = ni, cost
			if offer != nil {
				best = offer.appendGPUs(best[:0], want)
			} else {
				best = append(best[:0], cands[:want]...)
			}
		}
	}
	switch {
	case memo != nil && !first:
		// By bound, then in the fixed order (migOrder): a group whose
		// bound is above the best cost found holds no node that can win
		// or tie; within a group of nodes whose hosts feed all their
		// slices (cost at least the bound), once the best costs the bound
		// no later node can win.
		o := memo.orderOf(c, p, pl, want, gen, ch.rank, ch.rankGen)
		for _, key := range o.keys {
			if bestNode >= 0 && key > bestCost+1e-9 {
				break
			}
			g := o.groups[key]
			for _, ni := range g.nodes {
				visit(ni)
				if g.unfed == 0 && bestNode >= 0 && (bestCost < key || (bestCost == key && !earlier(ni, bestNode))) {
					break
				}
			}
		}
	default:
		for ni := range c.Nodes {
			visit(ni)
			if first && bestNode >= 0 {
				break
			}
		}
	}
	if bestNode < 0 {
		return Decision{Node: -1}, noFit(c, p)
	}
	d := Decision{Node: bestNode, GPUs: make([]int, want), MIG: make([]MIGChoice, want)}
	for k, x := range best {
		d.GPUs[k], d.MIG[k] = x.gi, x.opt.choice
	}
	return d, nil
}

// migNodeOption is what node n offers p under pl, whatever its CPU and
// memory: the cost of its want cheapest GPUs (the first want under first
// fit) and those GPUs, first in cands (reused); ok false when fewer than
// want GPUs can take an instance.
func migNodeOption(n *Node, p *Pod, pl migPlanner, first bool, want int, cands []migCand) (float64, []migCand, bool) {
	for gi := range n.GPUs {
		g := &n.GPUs[gi]
		if g.MIG == nil || !modelAllowed(p, g.Model) {
			continue
		}
		if o, ok := pl.option(g, p); ok {
			cands = append(cands, migCand{gi, o})
		}
	}
	if len(cands) < want {
		return 0, cands, false
	}
	switch {
	case want == 1 && !first: // the cheapest, first on ties
		m := 0
		for k := range cands {
			if cands[k].opt.cost < cands[m].opt.cost {
				m = k
			}
		}
		cands[0] = cands[m]
	case want > 1:
		slices.SortStableFunc(cands, func(a, b migCand) int { return cmp.Compare(a.opt.cost, b.opt.cost) })
	}
	var cost float64
	for k := 0; k < want; k++ {
		cost += cands[k].opt.cost
	}
	return cost, cands, true
}

// migCand is one GPU's option in chooseMIG.
type migCand struct {
	gi  int
	opt migOption
}

// applyMIG books (release false) or gives back (release true) a MIG
// decision on n, checking everything before changing anything.
func applyMIG(n *Node, p *Pod, d Decision, release bool) error {
	if len(d.MIG) != len(d.GPUs) {
		return fmt.Errorf("decision names %d GPUs but %d MIG instances", len(d.GPUs), len(d.MIG))
	}
	prof := p.GPU.MIGProfile
	// Work on copies, so a failure half-way changes nothing.
	work := make([]*MIGGPU, len(d.GPUs))
	for k, gi := range d.GPUs {
		g := &n.GPUs[gi]
		if g.MIG == nil {
			return fmt.Errorf("node %s GPU %d is not in MIG mode", n.Name, g.Index)
		}
		if !modelAllowed(p, g.Model) {
			return fmt.Errorf("node %s GPU %d: model %s not allowed", n.Name, g.Index, g.Model)
		}
		m := g.MIG.clone()
		work[k] = m
		ch := d.MIG[k]
		if ch.Create && !release {
			if !m.Managed {
				return fmt.Errorf("node %s GPU %d: MIG layout not managed by Tessera, no instance can be created", n.Name, g.Index)
			}
			i := m.Spec.ProfileIndex(prof)
			if m.Spec == nil || i < 0 {
				return fmt.Errorf("node %s GPU %d: %s has no MIG profile %s", n.Name, g.Index, g.Model, prof)
			}
			used, media, known := m.occupancy()
			if !known {
				return fmt.Errorf("node %s GPU %d: an instance's start slot is unknown, no instance can be created", n.Name, g.Index)
			}
			if why := m.Spec.CanPlace(used, media, i, ch.Start); why != "" {
				return fmt.Errorf("node %s GPU %d: %s", n.Name, g.Index, why)
			}
			m.Instances = append(m.Instances, MIGInstance{Profile: m.Spec.Profiles[i].Name, Start: ch.Start, InUse: true, q1: i + 1})
			continue
		}
		k2 := -1
		for j, in := range m.Instances {
			if !strings.EqualFold(in.Profile, prof) {
				continue
			}
			if (ch.UUID != "" && in.UUID == ch.UUID) || (ch.UUID == "" && ch.Start >= 0 && in.Start == ch.Start) {
				k2 = j
				break
			}
		}
		if k2 < 0 {
			return fmt.Errorf("node %s GPU %d: no %s instance at start %d (uuid %q)", n.Name, g.Index, prof, ch.Start, ch.UUID)
		}
		switch {
		case !release && m.Instances[k2].InUse:
			return fmt.Errorf("node %s GPU %d: %s instance at start %d is in use", n.Name, g.Index, prof, ch.Start)
		case release && !m.Instances[k2].InUse:
			return fmt.Errorf("node %s GPU %d: %s instance at start %d is not in use", n.Name, g.Index, prof, ch.Start)
		case release && ch.Create:
			m.Instances = slices.Delete(m.Instances, k2, k2+1) // the node destroys what it created
		default:
			m.Instances[k2].InUse = !release
		}
	}
	for k, gi := range d.GPUs {
		g := &n.GPUs[gi]
		g.MIG = work[k]
		migFree(g)
	}
	return nil
}

// migFromInventory builds the MIG side of a GPU in MIG mode.
func migFromInventory(g *inventory.GPU, cat *catalog.Catalog) (*MIGGPU, error) {
	m := &MIGGPU{Model: g.Model, Managed: g.MIGManaged}
	if cat != nil {
		if mod, ok := cat.Lookup(g.Model); ok && mod.SupportsMIG() {
			m.Spec = mod.MIG
		}
	}
	for _, in := range g.MIGInstances {
		start := -1
		if in.Start != nil {
			start = *in.Start
		}
		m.Instances = append(m.Instances, MIGInstance{Profile: in.Profile, Start: start, UUID: in.UUID, InUse: in.InUse,
			q1: m.Spec.ProfileIndex(in.Profile) + 1})
	}
	if m.Spec != nil {
		if _, _, err := g.MIGLayout(m.Spec); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// FreeSlots lists the memory slices no instance occupies, ascending; ok
// is false when the model has no geometry or an instance's start is
// unknown.
func (m *MIGGPU) FreeSlots() (free []int, ok bool) {
	used, _, known := m.occupancy()
	if !known {
		return nil, false
	}
	for k := 0; k < m.Spec.MemorySlices; k++ {
		if used&(1<<k) == 0 {
			free = append(free, k)
		}
	}
	return free, true
}
