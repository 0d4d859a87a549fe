package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// hamiA100 is HAMi's template list for the A100-40GB (knownMigGeometries,
// in its order), with the starts the driver would give.
func hamiA100() map[string][]MIGTemplate {
	var all1g MIGTemplate
	for s := 0; s < 7; s++ {
		all1g = append(all1g, catalog.MIGPlacement{Profile: "1g.5gb", Start: s})
	}
	return map[string][]MIGTemplate{"A100-40GB": {
		all1g,
		{{Profile: "2g.10gb", Start: 0}, {Profile: "2g.10gb", Start: 2}, {Profile: "2g.10gb", Start: 4}, {Profile: "1g.5gb", Start: 6}},
		{{Profile: "3g.20gb", Start: 0}, {Profile: "3g.20gb", Start: 4}},
		{{Profile: "7g.40gb", Start: 0}},
	}}
}

func newHAMi(t *testing.T) *MIGTemplates {
	t.Helper()
	m, err := NewMIGTemplates(catalog.Default(), hamiA100())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMIGTemplatesPicksFirstFittingTemplate: an empty GPU takes the first
// template with an instance covering the request (compute and memory),
// and the request its first such instance.
func TestMIGTemplatesPicksFirstFittingTemplate(t *testing.T) {
	cases := []struct {
		ask, gets string
		start     int
	}{
		{"1g.5gb", "1g.5gb", 0},   // template 0
		{"1g.10gb", "2g.10gb", 0}, // 1g.5gb has too little memory: template 1, its first 2g
		{"2g.10gb", "2g.10gb", 0}, // template 1
		{"3g.20gb", "3g.20gb", 0}, // template 2
		{"4g.20gb", "7g.40gb", 0}, // no 3g covers 4 compute slices: the whole GPU
		{"7g.40gb", "7g.40gb", 0},
	}
	m := newHAMi(t)
	for _, tc := range cases {
		c := cluster(t, migInv("n", "A100-40GB", 2, true))
		p := migPod("p", tc.ask, 1)
		d, prof, err := m.Place(c, &p)
		if err != nil || prof != tc.gets || d.Node != 0 || len(d.GPUs) != 1 || d.GPUs[0] != 0 || d.MIG[0] != (MIGChoice{Start: tc.start, Create: true}) {
			t.Errorf("%s: %+v %q %v; want a new %s@%d on GPU 0", tc.ask, d, prof, err, tc.gets, tc.start)
		}
	}
}

// TestMIGTemplatesKeepsTemplate: a GPU with instances keeps its template;
// a request takes the first free instance of it that covers it, even a
// larger one, then the next GPU once the template is full.
func TestMIGTemplatesKeepsTemplate(t *testing.T) {
	busy := func(profile string, start int) inventory.MIGInstance {
		return inst(profile, start, fmt.Sprintf("MIG-%s-%d", profile, start), true)
	}
	cases := []struct {
		name      string
		gpu0      []inventory.MIGInstance
		ask, gets string
		gpu       int
		start     int
	}{
		{"1g on template 1 takes the first free 2g", []inventory.MIGInstance{busy("2g.10gb", 0)}, "1g.5gb", "2g.10gb", 0, 2},
		{"1g on template 1 with every 2g taken takes its 1g", []inventory.MIGInstance{busy("2g.10gb", 0), busy("2g.10gb", 2), busy("2g.10gb", 4)}, "1g.5gb", "1g.5gb", 0, 6},
		{"3g beside a 2g: template 1 has none, the next GPU", []inventory.MIGInstance{busy("2g.10gb", 2)}, "3g.20gb", "3g.20gb", 1, 0},
		{"1g on template 0", []inventory.MIGInstance{busy("1g.5gb", 0), busy("1g.5gb", 1)}, "1g.5gb", "1g.5gb", 0, 2},
		{"2g on template 0: the next GPU", []inventory.MIGInstance{busy("1g.5gb", 3)}, "2g.10gb", "2g.10gb", 1, 0},
		{"3g on template 2", []inventory.MIGInstance{busy("3g.20gb", 0)}, "3g.20gb", "3g.20gb", 0, 4},
		{"a layout no template holds offers nothing", []inventory.MIGInstance{busy("4g.20gb", 0)}, "1g.5gb", "1g.5gb", 1, 0},
	}
	m := newHAMi(t)
	for _, tc := range cases {
		c := cluster(t, migInv("n", "A100-40GB", 2, true, tc.gpu0))
		p := migPod("p", tc.ask, 1)
		d, prof, err := m.Place(c, &p)
		if err != nil || prof != tc.gets || d.GPUs[0] != tc.gpu || d.MIG[0] != (MIGChoice{Start: tc.start, Create: true}) {
			t.Errorf("%s: %+v %q %v; want a new %s@%d on GPU %d", tc.name, d, prof, err, tc.gets, tc.start, tc.gpu)
			continue
		}
		q := p
		q.GPU.MIGProfile = prof
		if err := c.Apply(&q, d); err != nil {
			t.Errorf("%s: the decision does not apply: %v", tc.name, err)
		}
	}
}

// TestMIGTemplatesNodes: the first node with the CPU, the memory and Count
// GPUs offering one profile; none gives ErrNoFit; a request that is not
// MIG is refused.
func TestMIGTemplatesNodes(t *testing.T) {
	m := newHAMi(t)
	small := migInv("small", "A100-40GB", 1, true)
	poor := migInv("poor", "A100-40GB", 2, true)
	poor.CPUMilli = 500
	c := cluster(t, small, poor, migInv("ok", "A100-40GB", 2, true))
	p := migPod("p", "7g.40gb", 2)
	d, prof, err := m.Place(c, &p)
	if err != nil || d.Node != 2 || prof != "7g.40gb" || len(d.GPUs) != 2 {
		t.Fatalf("two 7g: %+v %q %v; want both GPUs of node ok", d, prof, err)
	}
	p = migPod("p", "7g.40gb", 3)
	if _, _, err := m.Place(c, &p); !errors.Is(err, ErrNoFit) {
		t.Errorf("three 7g: %v, want ErrNoFit", err)
	}
	share := sharePod("s", 1000, 250)
	if _, _, err := m.Place(c, &share); err == nil || !strings.Contains(err.Error(), "MIG requests only") {
		t.Errorf("a share: %v", err)
	}
}

func TestNewMIGTemplatesRefuses(t *testing.T) {
	cases := []struct {
		name string
		list map[string][]MIGTemplate
		want string
	}{
		{"unknown model", map[string][]MIGTemplate{"Z9000": {{{Profile: "1g.5gb", Start: 0}}}}, `model "Z9000" is not in the catalog`},
		{"no MIG", map[string][]MIGTemplate{"T4": {{{Profile: "1g.5gb", Start: 0}}}}, "does not support MIG"},
		{"empty list", map[string][]MIGTemplate{"A100-40GB": {}}, "empty template list"},
		{"empty template", map[string][]MIGTemplate{"A100-40GB": {{}}}, "template 0 is empty"},
		{"overlap", map[string][]MIGTemplate{"A100-40GB": {{{Profile: "3g.20gb", Start: 0}, {Profile: "2g.10gb", Start: 2}}}}, "overlaps memory slices"},
		{"bad start", map[string][]MIGTemplate{"A100-40GB": {{{Profile: "4g.20gb", Start: 4}}}}, "cannot start at memory slice 4"},
		{"twice", map[string][]MIGTemplate{"A100-40GB": {{{Profile: "7g.40gb", Start: 0}}}, "A100-SXM4-40GB": {{{Profile: "7g.40gb", Start: 0}}}}, "listed twice"},
	}
	for _, tc := range cases {
		if _, err := NewMIGTemplates(catalog.Default(), tc.list); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestMIGTemplatesRandomStream: random requests placed by template
// matching and booked as the instance taken never break a layout, every
// GPU holds a subset of one template, and the instance taken covers the
// request.
func TestMIGTemplatesRandomStream(t *testing.T) {
	m := newHAMi(t)
	a100, _ := catalog.Default().Lookup("A100-40GB")
	templates := hamiA100()["A100-40GB"]
	profiles := []string{"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		c := cluster(t, migInv("a", "A100-40GB", 4, true), migInv("b", "A100-40GB", 4, true))
		for step := 0; step < 200; step++ {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			ask := profiles[rng.IntN(len(profiles))]
			p := migPod(label, ask, 1+rng.IntN(2))
			d, prof, err := m.Place(c, &p)
			if errors.Is(err, ErrNoFit) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			qa, qp := a100.MIG.ProfileIndex(ask), a100.MIG.ProfileIndex(prof)
			if a100.MIG.Profiles[qp].ComputeSlices < a100.MIG.Profiles[qa].ComputeSlices || a100.MIG.Profiles[qp].MemoryMiB < a100.MIG.Profiles[qa].MemoryMiB {
				t.Fatalf("%s: asked %s, got %s, which does not cover it", label, ask, prof)
			}
			b := p
			b.GPU.MIGProfile = prof
			if err := c.Apply(&b, d); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			checkMIGLayouts(t, c, label)
			for ni := range c.Nodes {
				for gi := range c.Nodes[ni].GPUs {
					if !inSomeTemplate(c.Nodes[ni].GPUs[gi].MIG.Instances, templates) {
						t.Fatalf("%s: node %d GPU %d holds %+v, in no template", label, ni, gi, c.Nodes[ni].GPUs[gi].MIG.Instances)
					}
				}
			}
		}
	}
}

func inSomeTemplate(ins []MIGInstance, templates []MIGTemplate) bool {
next:
	for _, tpl := range templates {
		for _, in := range ins {
			found := false
			for _, s := range tpl {
				found = found || (s.Profile == in.Profile && s.Start == in.Start)
			}
			if !found {
				continue next
			}
		}
		return true
	}
	return false
}
