package tracesim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// The MIG variant of the static replay (docs/simulator.md, "MIG: what
// isolation costs").
//
// The openb cluster has no MIG-capable GPU, so the variant keeps the node
// list (every node's name, CPU, memory and GPU count) and makes every GPU
// one MIG-capable model (A100-40GB, H100-SXM, ...), and maps each GPU pod
// of the trace to the smallest MIG profile of that model that covers it:
//
//   - compute: the profile's compute slices over the GPU's are at least the
//     pod's share (gpu_milli / 1000);
//   - memory: a pod that gives its GPU memory needs a profile with at
//     least that much. The openb traces give none. Under MIGMemoryShare (the
//     default) a pod needs its compute share of the GPU's memory, as the
//     simulator assumes for fractional sharing (docs/simulator.md,
//     "Differences from the study's method"), and a profile has its memory
//     slices' share of it (eighths: the lgip memory figures are those
//     eighths less what the driver reserves, so a full-GPU instance holds
//     a whole GPU's share); under MIGMemoryNone memory is left out and
//     compute alone picks the profile;
//   - smallest: fewest compute slices, then fewest memory slices, then
//     least memory; media-extension (+me) profiles are left out.
//
// A whole-GPU pod (gpu_milli 1000, any GPU count) keeps asking for whole
// GPUs: one full-GPU instance (7g) on each. CPU and host memory are the
// trace's. A pod's gpu_spec (allowed models) is dropped: every GPU is the
// one model.
//
// The arrivals are built from the trace as it is (the GPU count, so the
// capacity and the copies, are the same), so every setup of one seed sees
// the same pods in the same order, and arrived and failed demand are
// counted in the trace's gpu_milli. What a placed pod holds is counted
// apart: a MIG instance holds its compute slices (7g: the whole GPU) and
// its memory slices, whatever share its pod asked.
//
// Setups (MIGSetups), each a cluster configuration and a scheduler that
// places all its pods, CPU-only ones included, so that every pod of a
// setup goes in one node order (placement.FirstFit says why that matters):
//
//   - fractional: no MIG; the pods as they are, with Tessera's default
//     policy (the price of isolation is measured against it);
//   - static-all-1g, static-all-balanced: layouts created up front as
//     NVIDIA mig-parted's all-1g.5gb (all-1g.10gb on 80 GB models) and
//     all-balanced configurations do (2 x 1g, 1 x 2g, 1 x 3g on a 7-slice
//     GPU). mig-parted applies one configuration per node, and these
//     layouts have no full-GPU instance, so the nodes that serve the
//     whole-GPU requests are set up as all-7g: the nodes with the most GPUs
//     first, until they hold the share of the trace's GPU demand (in
//     compute slices, as mapped) that asks for 7g. A request takes a free
//     instance of its own profile or fails, first fit (placement.FirstFit,
//     which places the CPU-only pods too); the layouts never change;
//   - template: template matching as HAMi's first dynamic-MIG design does
//     (placement.MIGTemplates), with HAMi's template list for the A100
//     (knownMigGeometries: 7 x 1g; 3 x 2g + 1 x 1g; 2 x 3g; 1 x 7g, under the
//     model's own profile names); CPU-only pods first fit;
//   - first-fit: dynamic MIG (every GPU managed, empty at the start), every
//     pod first fit: first node, first GPU, lowest free start
//     (placement.FirstFit);
//   - tessera: dynamic MIG, every pod placed by Tessera's default policy,
//     MIG requests by its MIG planner (placement/migplanner.go) with the
//     typical MIG requests of the mapped trace.

// MIG setups.
const (
	SetupFractional     = "fractional"
	SetupStaticAll1g    = "static-all-1g"
	SetupStaticBalanced = "static-all-balanced"
	SetupTemplate       = "template"
	SetupFirstFit       = "first-fit"
	SetupPlanner        = "tessera"
)

// MIGSetups lists the setups of the MIG variant, in the order tables
// show them.
func MIGSetups() []string {
	return []string{SetupFractional, SetupStaticAll1g, SetupStaticBalanced, SetupTemplate, SetupFirstFit, SetupPlanner}
}

// GPU memory a sharing pod of the trace is assumed to need.
const (
	// MIGMemoryShare: its compute share of the GPU's memory.
	MIGMemoryShare = "share"
	// MIGMemoryNone: none; compute alone picks the profile.
	MIGMemoryNone = "none"
)

// MIGVariant turns the trace's cluster and pods into their MIG variant for
// one GPU model. It is read only once built and may be shared by replays
// running at once.
type MIGVariant struct {
	model     string
	memory    string
	cat       *catalog.Catalog
	spec      *catalog.MIGSpec
	gpuMemMiB int64
	// byMilli[m] is the profile (index in spec) of a pod asking m
	// thousandths of a GPU, for m in [0, 1000]; -1 when none covers it.
	byMilli []int
	// one, two, three and seven are the 1g (one memory slice), 2g, 3g and
	// full-GPU profiles.
	one, two, three, seven int
	templates              []placement.MIGTemplate
}

// NewMIGVariant builds the variant for a catalog model with MIG (named as
// the catalog names it or by an alias) and a memory assumption
// (MIGMemoryShare or MIGMemoryNone). The setups' layouts are defined for
// GPUs of 7 compute and 8 memory slices (A100, H100, H200, B200 and the
// like).
func NewMIGVariant(cat *catalog.Catalog, model, memory string) (*MIGVariant, error) {
	if cat == nil {
		cat = catalog.Default()
	}
	m, ok := cat.Lookup(model)
	if !ok {
		return nil, fmt.Errorf("MIG variant: model %q is not in the catalog", model)
	}
	if !m.SupportsMIG() {
		return nil, fmt.Errorf("MIG variant: model %s does not support MIG", m.Name)
	}
	if m.MIG.ComputeSlices != 7 || m.MIG.MemorySlices != 8 {
		return nil, fmt.Errorf("MIG variant: model %s has %d compute and %d memory slices; the variant's layouts are defined for 7 and 8 (A100, H100, H200, B200)",
			m.Name, m.MIG.ComputeSlices, m.MIG.MemorySlices)
	}
	if memory != MIGMemoryShare && memory != MIGMemoryNone {
		return nil, fmt.Errorf("MIG variant: memory assumption must be %s or %s, got %q", MIGMemoryShare, MIGMemoryNone, memory)
	}
	v := &MIGVariant{model: m.Name, memory: memory, cat: cat, spec: m.MIG, gpuMemMiB: m.MemoryMiB}
	var err error
	if v.one, err = v.profileOf(1, 1); err != nil {
		return nil, err
	}
	if v.two, err = v.profileOf(2, 2); err != nil {
		return nil, err
	}
	if v.three, err = v.profileOf(3, 4); err != nil {
		return nil, err
	}
	if v.seven, err = v.profileOf(7, 8); err != nil {
		return nil, err
	}
	v.byMilli = make([]int, request.Whole+1)
	for milli := range v.byMilli {
		v.byMilli[milli] = v.smallest(int64(milli), 0)
	}
	if q := v.byMilli[request.Whole]; q != v.seven {
		return nil, fmt.Errorf("MIG variant: model %s: a whole GPU does not map to its full-GPU profile %s (got position %d)", m.Name, v.spec.Profiles[v.seven].Name, q)
	}
	// HAMi's list, in its order: 7 x 1g; 3 x 2g + 1 x 1g; 2 x 3g; 1 x 7g.
	for _, set := range [][]int{
		{v.one, v.one, v.one, v.one, v.one, v.one, v.one},
		{v.two, v.two, v.two, v.one},
		{v.three, v.three},
		{v.seven},
	} {
		l, err := layoutOf(v.spec, set)
		if err != nil {
			return nil, fmt.Errorf("MIG variant: model %s: template: %w", m.Name, err)
		}
		v.templates = append(v.templates, l)
	}
	return v, nil
}

// Model is the variant's catalog model name.
func (v *MIGVariant) Model() string { return v.model }

// Memory is the variant's memory assumption.
func (v *MIGVariant) Memory() string { return v.memory }

// profileOf finds the model's profile (not +me) of that many compute and
// memory slices.
func (v *MIGVariant) profileOf(compute, memory int) (int, error) {
	for q, p := range v.spec.Profiles {
		if p.ComputeSlices == compute && p.MemorySlices == memory && !p.MediaExtended() {
			return q, nil
		}
	}
	return -1, fmt.Errorf("MIG variant: model %s has no profile of %d compute and %d memory slices (it has %s)",
		v.model, compute, memory, strings.Join(v.spec.ProfileNames(), ", "))
}

// smallest is the smallest profile covering a pod asking milli of a
// GPU's compute and, when memMiB > 0, that much GPU memory (else what the
// memory assumption says), or -1.
func (v *MIGVariant) smallest(milli, memMiB int64) int {
	best := -1
	for q := range v.spec.Profiles {
		p := &v.spec.Profiles[q]
		if p.MediaExtended() || int64(p.ComputeSlices)*request.Whole < milli*int64(v.spec.ComputeSlices) {
			continue
		}
		switch {
		case memMiB > 0 && p.MemoryMiB < memMiB:
			continue
		case memMiB == 0 && v.memory == MIGMemoryShare && int64(p.MemorySlices)*request.Whole < milli*int64(v.spec.MemorySlices):
			continue
		}
		if best < 0 || smaller(p, &v.spec.Profiles[best]) {
			best = q
		}
	}
	return best
}

// smaller orders profiles: fewer compute slices, then fewer memory
// slices, then less memory.
func smaller(a, b *catalog.MIGProfile) bool {
	return cmp.Or(cmp.Compare(a.ComputeSlices, b.ComputeSlices), cmp.Compare(a.MemorySlices, b.MemorySlices), cmp.Compare(a.MemoryMiB, b.MemoryMiB)) < 0
}

// Profile names the profile a GPU pod is mapped to ("" for a CPU-only
// pod). A pod that gives its GPU memory (the openb traces do not) needs a
// profile with at least that memory, whatever the memory assumption; a
// memory-only share asks its memory's share of the GPU's compute.
func (v *MIGVariant) Profile(p *placement.Pod) (string, error) {
	if p.GPUCount() == 0 {
		return "", nil
	}
	milli, mem := p.MilliPerGPU(), p.GPU.MemoryMiB
	if p.GPU.Exclusive || milli == request.Whole {
		mem = 0 // a whole GPU: the full-GPU instance
	}
	if milli < 0 || milli > request.Whole {
		return "", fmt.Errorf("pod %s: GPU share %dm is outside [0, %d]", p.Name, milli, request.Whole)
	}
	if milli == 0 && mem > 0 {
		milli = min(request.Whole, (mem*request.Whole+v.gpuMemMiB-1)/v.gpuMemMiB)
	}
	q := v.byMilli[milli]
	if mem > 0 {
		q = v.smallest(milli, mem)
	}
	if q < 0 {
		return "", fmt.Errorf("pod %s: no %s profile covers a %dm share with %d MiB of GPU memory", p.Name, v.model, milli, mem)
	}
	return v.spec.Profiles[q].Name, nil
}

// Pod is p as the setup places it: under fractional the trace's pod
// without its allowed models (every GPU is the one model), otherwise a MIG
// request for Count instances of its profile; CPU and memory are the
// trace's, and a CPU-only pod is unchanged.
func (v *MIGVariant) Pod(setup string, p placement.Pod) (placement.Pod, error) {
	p.GPU.Models = nil
	if setup == SetupFractional {
		return p, nil
	}
	prof, err := v.Profile(&p)
	if err != nil || prof == "" {
		return p, err
	}
	p.GPU = request.GPU{Count: p.GPU.Count, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: prof}
	return p, nil
}

// Pods maps every pod as the setup places it (Pod).
func (v *MIGVariant) Pods(setup string, pods []placement.Pod) ([]placement.Pod, error) {
	out := make([]placement.Pod, len(pods))
	for i := range pods {
		var err error
		if out[i], err = v.Pod(setup, pods[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// held is what a booked pod holds, in thousandths of a GPU: compute (a MIG
// instance's compute slices) and memory (its memory slices); a fractional
// or whole-GPU pod holds its compute share of both.
func (v *MIGVariant) held(p *placement.Pod) (compute, memory float64) {
	if !p.MIG() {
		m := float64(p.TotalGPUMilli())
		return m, m
	}
	q := v.spec.ProfileIndex(p.GPU.MIGProfile)
	if q < 0 {
		return 0, 0
	}
	pr := &v.spec.Profiles[q]
	n := float64(p.GPUCount()) * request.Whole
	return n * float64(pr.ComputeSlices) / float64(v.spec.ComputeSlices), n * float64(pr.MemorySlices) / float64(v.spec.MemorySlices)
}

// Templates is the template list of the template setup, by model.
func (v *MIGVariant) Templates() map[string][]placement.MIGTemplate {
	return map[string][]placement.MIGTemplate{v.model: slices.Clone(v.templates)}
}

// Layout is the layout a static setup creates on each GPU of its layout
// nodes (nil for the other setups): mig-parted's all-1g or all-balanced.
func (v *MIGVariant) Layout(setup string) ([]catalog.MIGPlacement, error) {
	switch setup {
	case SetupStaticAll1g:
		return layoutOf(v.spec, []int{v.one, v.one, v.one, v.one, v.one, v.one, v.one})
	case SetupStaticBalanced:
		return layoutOf(v.spec, []int{v.one, v.one, v.two, v.three})
	}
	return nil, nil
}

// layoutOf places the profiles (positions in spec) on one GPU at valid
// starts, trying the lowest starts first, and checks the layout.
func layoutOf(spec *catalog.MIGSpec, profiles []int) ([]catalog.MIGPlacement, error) {
	out := make([]catalog.MIGPlacement, len(profiles))
	var place func(k int, used uint32, media bool) bool
	place = func(k int, used uint32, media bool) bool {
		if k == len(profiles) {
			return true
		}
		q := profiles[k]
		for _, st := range spec.Profiles[q].Starts {
			if spec.Fits(used, media, q, st) {
				out[k] = catalog.MIGPlacement{Profile: spec.Profiles[q].Name, Start: st}
				if place(k+1, used|spec.SlotMask(q, st), media || spec.Profiles[q].MediaExtended()) {
					return true
				}
			}
		}
		return false
	}
	names := make([]string, len(profiles))
	for i, q := range profiles {
		names[i] = spec.Profiles[q].Name
	}
	if !place(0, 0, false) {
		return nil, fmt.Errorf("no valid layout holds %s", strings.Join(names, " + "))
	}
	if err := spec.CheckLayout(out); err != nil {
		return nil, fmt.Errorf("layout %s: %w", strings.Join(names, " + "), err)
	}
	return out, nil
}

// isMIGSetup reports whether setup is one of MIGSetups.
func isMIGSetup(setup string) bool { return slices.Contains(MIGSetups(), setup) }

// Cluster builds the setup's cluster from the trace's node list (pods, as
// mapped by Pods, size the static setups' all-7g nodes). It returns the
// number of GPUs set up as whole (all-7g) in a static setup, else 0.
func (v *MIGVariant) Cluster(nodes *placement.Cluster, setup string, pods []placement.Pod) (*placement.Cluster, int, error) {
	if !isMIGSetup(setup) {
		return nil, 0, fmt.Errorf("MIG variant: unknown setup %q: want one of %s", setup, strings.Join(MIGSetups(), ", "))
	}
	if setup == SetupFractional {
		c := &placement.Cluster{Nodes: make([]placement.Node, 0, len(nodes.Nodes))}
		for i := range nodes.Nodes {
			n := &nodes.Nodes[i]
			c.Nodes = append(c.Nodes, placement.NewNode(n.Name, n.CPUMilli, n.MemoryMiB, len(n.GPUs), v.model, 0))
		}
		return c, 0, nil
	}
	layout, err := v.Layout(setup)
	if err != nil {
		return nil, 0, fmt.Errorf("MIG variant: %s: %w", setup, err)
	}
	var whole map[int]bool
	wholeGPUs := 0
	if layout != nil {
		whole, wholeGPUs = v.wholeNodes(nodes, pods)
	}
	full := []catalog.MIGPlacement{{Profile: v.spec.Profiles[v.seven].Name, Start: 0}}
	inv := make([]inventory.Node, 0, len(nodes.Nodes))
	for i := range nodes.Nodes {
		n := &nodes.Nodes[i]
		in := inventory.Node{Name: n.Name, CPUMilli: n.CPUMilli, MemoryMiB: n.MemoryMiB, Source: "sim"}
		for k := range n.GPUs {
			g := inventory.GPU{UUID: fmt.Sprintf("GPU-%s-%d", n.Name, k), Index: k, Model: v.model, MemoryMiB: v.gpuMemMiB,
				MIGMode: inventory.MIGEnabled, MIGManaged: layout == nil, NUMANode: -1, Health: inventory.Healthy}
			l := layout
			if whole[i] {
				l = full
			}
			for _, pl := range l {
				start := pl.Start
				g.MIGInstances = append(g.MIGInstances, inventory.MIGInstance{UUID: fmt.Sprintf("MIG-%s-%d-%d", n.Name, k, start),
					Profile: pl.Profile, MemoryMiB: v.profileMemory(pl.Profile), Start: &start})
			}
			in.GPUs = append(in.GPUs, g)
		}
		inv = append(inv, in)
	}
	c, err := placement.FromInventoryCatalog(inv, v.cat)
	if err != nil {
		return nil, 0, fmt.Errorf("MIG variant: %s cluster: %w", setup, err)
	}
	return c, wholeGPUs, nil
}

func (v *MIGVariant) profileMemory(name string) int64 {
	if q := v.spec.ProfileIndex(name); q >= 0 {
		return v.spec.Profiles[q].MemoryMiB
	}
	return 0
}

// wholeNodes picks the static setups' all-7g nodes: the nodes with the most
// GPUs first (in list order among equals), until they hold the share of
// the pods' GPU demand, in compute slices, that asks for the full-GPU
// profile. It returns them by position and their GPU count.
func (v *MIGVariant) wholeNodes(nodes *placement.Cluster, pods []placement.Pod) (map[int]bool, int) {
	var seven, all int64
	full := v.spec.Profiles[v.seven].Name
	for i := range pods {
		p := &pods[i]
		if !p.MIG() {
			continue
		}
		q := v.spec.ProfileIndex(p.GPU.MIGProfile)
		if q < 0 {
			continue
		}
		s := int64(p.GPUCount() * v.spec.Profiles[q].ComputeSlices)
		all += s
		if strings.EqualFold(p.GPU.MIGProfile, full) {
			seven += s
		}
	}
	total := 0
	order := make([]int, len(nodes.Nodes))
	for i := range order {
		order[i] = i
		total += len(nodes.Nodes[i].GPUs)
	}
	if all == 0 {
		return nil, 0
	}
	want := (int64(total)*seven + all - 1) / all
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(nodes.Nodes[b].GPUs), len(nodes.Nodes[a].GPUs)) })
	out := map[int]bool{}
	have := 0
	for _, i := range order {
		if int64(have) >= want {
			break
		}
		if len(nodes.Nodes[i].GPUs) == 0 {
			continue
		}
		out[i] = true
		have += len(nodes.Nodes[i].GPUs)
	}
	return out, have
}

// migPlacer places the arrivals of one MIG setup: each pod as the setup
// places it (MIGVariant.Pod), MIG requests by template matching in the
// template setup and by the policy otherwise, everything else by the
// policy.
type migPlacer struct {
	v     *MIGVariant
	setup string
	pol   placement.Policy
	obs   placement.Observer
	tmpl  *placement.MIGTemplates
}

func (mp *migPlacer) place(c *placement.Cluster, p *placement.Pod) (booking, placement.Decision, error) {
	q, err := mp.v.Pod(mp.setup, *p)
	if err != nil {
		return booking{}, placement.Decision{Node: -1}, err
	}
	if mp.obs != nil {
		mp.obs.Observe(&q)
	}
	b, d, _, err := mp.book(c, q)
	return b, d, err
}

// book places q, a pod as the setup places it (MIGVariant.Pod), and books
// it on c. It returns what the booking holds, the decision and the pod as
// booked: under template matching a MIG request may take an instance of a
// larger profile, and the booked pod names that profile (releasing it
// needs that pod).
func (mp *migPlacer) book(c *placement.Cluster, q placement.Pod) (booking, placement.Decision, placement.Pod, error) {
	var d placement.Decision
	var err error
	if mp.tmpl != nil && q.MIG() {
		var prof string
		if d, prof, err = mp.tmpl.Place(c, &q); err == nil {
			q.GPU.MIGProfile = prof // the instance taken may be larger than asked
		}
	} else {
		d, err = mp.pol.Place(c, &q)
	}
	if err != nil {
		return booking{}, d, q, err
	}
	if err := c.Apply(&q, d); err != nil {
		return booking{}, d, q, fmt.Errorf("policy made an infeasible decision: %w", err)
	}
	compute, memory := mp.v.held(&q)
	return booking{compute: compute, memory: memory}, d, q, nil
}

// migSetup is one MIG setup built for a replay: its cluster, its placer,
// the typical distribution (of the mapped pods) and the GPUs a static
// setup made all-7g.
type migSetup struct {
	c         *placement.Cluster
	typical   placement.Distribution
	pl        *migPlacer
	wholeGPUs int
}

// newMIGSetup builds a setup of v on the node list for the trace's pods
// (mapped here: they size the static setups' all-7g nodes and give the
// typical requests).
func newMIGSetup(v *MIGVariant, setup string, nodes *placement.Cluster, tracePods []placement.Pod, seed uint64, popularity float64) (*migSetup, error) {
	if !isMIGSetup(setup) {
		return nil, fmt.Errorf("MIG setup %q: want one of %s", setup, strings.Join(MIGSetups(), ", "))
	}
	pods, err := v.Pods(setup, tracePods)
	if err != nil {
		return nil, fmt.Errorf("MIG variant: %w", err)
	}
	c, wholeGPUs, err := v.Cluster(nodes, setup, pods)
	if err != nil {
		return nil, err
	}
	typical := placement.TypicalShapes(pods, popularity)
	var pol placement.Policy = placement.NewFirstFit()
	if setup == SetupFractional || setup == SetupPlanner {
		if pol, err = placement.New(placement.DefaultPolicy, placement.Options{Seed: seed, Typical: typical, Popularity: popularity}); err != nil {
			return nil, err
		}
	}
	mp := &migPlacer{v: v, setup: setup, pol: pol}
	mp.obs, _ = pol.(placement.Observer)
	if setup == SetupTemplate {
		if mp.tmpl, err = placement.NewMIGTemplates(v.cat, v.Templates()); err != nil {
			return nil, err
		}
	}
	return &migSetup{c: c, typical: typical, pl: mp, wholeGPUs: wholeGPUs}, nil
}

// newMIGRun builds one MIG setup's replay: its cluster, its placer and the
// typical distribution (of the mapped pods).
func newMIGRun(cfg Config) (*replayRun, error) {
	v, setup := cfg.MIG, cfg.Policy
	if !isMIGSetup(setup) {
		return nil, fmt.Errorf("replay: MIG setup %q: want one of %s", setup, strings.Join(MIGSetups(), ", "))
	}
	if cfg.Breakdown {
		return nil, errors.New("replay: the breakdown is not defined for the MIG variant")
	}
	s, err := newMIGSetup(v, setup, cfg.Nodes, cfg.Pods, cfg.Seed, cfg.Popularity)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return &replayRun{c: s.c, typical: s.typical, name: setup, pl: s.pl,
		mig: &MIGResult{Model: v.model, Memory: v.memory, WholeGPUs: s.wholeGPUs}}, nil
}
