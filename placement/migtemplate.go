package placement

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
)

// Template matching: HAMi's first dynamic-MIG design (v2.5 to v2.9, its
// knownMigGeometries setting), kept as a baseline for the MIG planner
// (docs/simulator.md, "MIG: what isolation costs").
//
// HAMi keeps, per GPU model, a fixed list of whole-GPU layouts (templates).
// A GPU in MIG mode with no task takes the first template of the list that
// has an instance big enough for the request, and the request takes the
// first such instance of it; a GPU with tasks keeps its template, and a
// request takes the first free instance of that template that is big
// enough, even when it is larger than the request needs (a 1g request may
// get a 2g instance). The node and the GPUs are the first that can take the
// request (first node, GPUs in order), as in the first-fit baseline, so
// that only the layout rule differs.
//
// "Big enough" compares profiles: an instance covers a request for profile
// p when it has at least p's compute slices and at least p's memory. HAMi
// compares memory alone (the request's gpumem with the instance's); here
// compute is compared too, so that no policy gives a pod less compute than
// its profile.
//
// The template's instances are created as requests take them (HAMi has
// mig-parted create them all when it applies the template); a slot not
// created yet is reserved for the template all the same, so what is
// allocated is the same. The template in force on a GPU is read from its
// instances: the first template of the list that holds every instance at
// its start. The GPU's first instance is the first covering slot of the
// first template with one, so no earlier template holds an instance of its
// profile, and the reading is exact while instances only come. When
// workloads leave (a dynamic replay), the template is read from the
// instances that remain and may turn into an earlier template that holds
// them; HAMi keeps its template until the GPU is empty.
//
// MIGTemplates is not a Policy: the instance a request gets may be of a
// larger profile than the request names, so Place returns that profile,
// and the caller books the request as one for it. The engine's front doors
// never do this; the trace simulator uses it as a baseline.

// MIGTemplate is one whole-GPU layout of a template list: its instances,
// in the order requests take them.
type MIGTemplate []catalog.MIGPlacement

// MIGTemplates places MIG requests by template matching. Build it with
// NewMIGTemplates. It only reads the snapshot and keeps no state between
// decisions.
type MIGTemplates struct {
	// byModel holds each model's templates by the model's canonical name
	// (the GPU model label the snapshot carries).
	byModel map[string]*migTemplateList
}

// migTemplateList is one model's checked templates.
type migTemplateList struct {
	spec      *catalog.MIGSpec
	templates [][]migSlot
	// member[q][start] has bit t set when template t holds an instance of
	// profile q at start.
	member [][]uint64
}

// migSlot is one instance of a template: the profile's position in the
// list's spec and its start.
type migSlot struct {
	q, start int
}

// NewMIGTemplates checks each model's templates against the model's MIG
// geometry in cat (every template a valid whole-GPU layout) and returns the
// matcher. Models are named as cat names them or by an alias.
func NewMIGTemplates(cat *catalog.Catalog, templates map[string][]MIGTemplate) (*MIGTemplates, error) {
	if cat == nil {
		return nil, fmt.Errorf("MIG templates: no catalog")
	}
	t := &MIGTemplates{byModel: map[string]*migTemplateList{}}
	for name, list := range templates {
		m, ok := cat.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("MIG templates: model %q is not in the catalog", name)
		}
		if !m.SupportsMIG() {
			return nil, fmt.Errorf("MIG templates: model %s does not support MIG", m.Name)
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("MIG templates: model %s has an empty template list", m.Name)
		}
		if _, dup := t.byModel[m.Name]; dup {
			return nil, fmt.Errorf("MIG templates: model %s is listed twice (as %q and another name)", m.Name, name)
		}
		if len(list) > 64 {
			return nil, fmt.Errorf("MIG templates: model %s has %d templates, at most 64", m.Name, len(list))
		}
		tl := &migTemplateList{spec: m.MIG, member: make([][]uint64, len(m.MIG.Profiles))}
		for q := range tl.member {
			tl.member[q] = make([]uint64, m.MIG.MemorySlices)
		}
		for k, tpl := range list {
			if len(tpl) == 0 {
				return nil, fmt.Errorf("MIG templates: model %s template %d is empty", m.Name, k)
			}
			if err := m.MIG.CheckLayout(tpl); err != nil {
				return nil, fmt.Errorf("MIG templates: model %s template %d (%s): %w", m.Name, k, layoutString(tpl), err)
			}
			slots := make([]migSlot, len(tpl))
			for i, pl := range tpl {
				slots[i] = migSlot{q: m.MIG.ProfileIndex(pl.Profile), start: pl.Start}
				tl.member[slots[i].q][pl.Start] |= 1 << k
			}
			tl.templates = append(tl.templates, slots)
		}
		t.byModel[m.Name] = tl
	}
	return t, nil
}

func layoutString(l []catalog.MIGPlacement) string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

// covers reports whether an instance of profile a serves a request for
// profile b: at least its compute slices and its memory.
func (tl *migTemplateList) covers(a, b int) bool {
	pa, pb := &tl.spec.Profiles[a], &tl.spec.Profiles[b]
	return pa.ComputeSlices >= pb.ComputeSlices && pa.MemoryMiB >= pb.MemoryMiB
}

// templateOffer is what one GPU offers a request: the instance's profile
// and where it lies.
type templateOffer struct {
	gi      int
	profile string
	choice  MIGChoice
}

// offer returns the instance GPU g hands a request for profile q of the
// list's spec under template matching; ok false when it has none.
func (tl *migTemplateList) offer(g *GPU, q int) (templateOffer, bool) {
	m := g.MIG
	if !m.Managed {
		return templateOffer{}, false
	}
	if len(m.Instances) == 0 {
		for _, slots := range tl.templates {
			for _, s := range slots {
				if tl.covers(s.q, q) {
					return templateOffer{profile: tl.spec.Profiles[s.q].Name, choice: MIGChoice{Start: s.start, Create: true}}, true
				}
			}
		}
		return templateOffer{}, false
	}
	slots := tl.inForce(g)
	for _, s := range slots {
		if !tl.covers(s.q, q) {
			continue
		}
		k := instanceAt(m, s.start)
		switch {
		case k < 0:
			return templateOffer{profile: tl.spec.Profiles[s.q].Name, choice: MIGChoice{Start: s.start, Create: true}}, true
		case !m.Instances[k].InUse:
			in := &m.Instances[k]
			return templateOffer{profile: in.Profile, choice: MIGChoice{Start: in.Start, UUID: in.UUID}}, true
		}
	}
	return templateOffer{}, false
}

// inForce is the template a GPU with instances follows: the first that
// holds every instance at its start; nil when none does (then the GPU
// offers nothing).
func (tl *migTemplateList) inForce(g *GPU) []migSlot {
	m := g.MIG
	all := ^uint64(0)
	for k := range m.Instances {
		in := &m.Instances[k]
		q := tl.profileOf(g, in)
		if q < 0 || in.Start < 0 || in.Start >= len(tl.member[q]) {
			return nil
		}
		if all &= tl.member[q][in.Start]; all == 0 {
			return nil
		}
	}
	return tl.templates[bits.TrailingZeros64(all)]
}

// profileOf is the position of an instance's profile in the list's spec,
// or -1; it reads the instance's cached position in its GPU's spec when
// the two specs name that profile alike.
func (tl *migTemplateList) profileOf(g *GPU, in *MIGInstance) int {
	if g.MIG.Spec != nil {
		if q := in.profileIndex(g.MIG.Spec); q >= 0 && q < len(tl.spec.Profiles) && sameString(tl.spec.Profiles[q].Name, in.Profile) {
			return q
		}
	}
	return tl.spec.ProfileIndex(in.Profile)
}

// instanceAt is the position of m's instance starting at start, or -1.
func instanceAt(m *MIGGPU, start int) int {
	for k := range m.Instances {
		if m.Instances[k].Start == start {
			return k
		}
	}
	return -1
}

// Place decides where the MIG request p goes: the first node with its CPU
// and memory free and Count GPUs that each offer an instance of one
// profile covering p's, the first such GPUs. profile is the profile of
// the instances taken (p's own or a larger one); book p as a request for
// it. It returns a *NoFitError when no node can take p.
func (t *MIGTemplates) Place(c *Cluster, p *Pod) (d Decision, profile string, err error) {
	if !p.MIG() {
		return Decision{Node: -1}, "", fmt.Errorf("template matching places MIG requests only; pod %s asks for no MIG profile", p.Name)
	}
	want := p.GPUCount()
	var offers []templateOffer
	var lastModel string
	var tl *migTemplateList
	q := -1
	for ni := range c.Nodes {
		n := &c.Nodes[ni]
		if !okOpen(n, p) || !okCPU(n, p) || !okMemory(n, p) || !okPods(n, p) || len(n.GPUs) < want {
			continue
		}
		offers = offers[:0]
		for gi := range n.GPUs {
			g := &n.GPUs[gi]
			if g.MIG == nil || !modelAllowed(p, g.Model) {
				continue
			}
			if tl == nil || !sameString(g.Model, lastModel) {
				lastModel, tl, q = g.Model, t.byModel[g.Model], -1
				if tl != nil {
					q = tl.spec.ProfileIndex(p.GPU.MIGProfile)
				}
			}
			if q < 0 {
				continue
			}
			if o, ok := tl.offer(g, q); ok {
				o.gi = gi
				offers = append(offers, o)
			}
		}
		if d, profile, ok := pickOffers(ni, offers, want); ok {
			return d, profile, nil
		}
	}
	return Decision{Node: -1}, "", noFit(c, p)
}

// pickOffers takes, on node ni, the first want offers of the first profile
// (in GPU order) that want GPUs offer.
func pickOffers(ni int, offers []templateOffer, want int) (Decision, string, bool) {
	for i := range offers {
		prof := offers[i].profile
		d := Decision{Node: ni}
		for _, o := range offers[i:] {
			if strings.EqualFold(o.profile, prof) {
				d.GPUs = append(d.GPUs, o.gi)
				d.MIG = append(d.MIG, o.choice)
				if len(d.GPUs) == want {
					return d, prof, true
				}
			}
		}
	}
	return Decision{}, "", false
}
