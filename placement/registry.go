package placement

import (
	"fmt"
	"slices"
	"strings"
)

// Options configure a policy built by name.
type Options struct {
	// Seed drives every random choice (tie-breaking, Random).
	Seed uint64
	// Typical is the typical-pod distribution known in advance (FGD,
	// Tessera). Online variants ignore it. When it is empty, "fgd" and
	// "tessera" learn it online, as a scheduler that knows nothing in
	// advance must: they are then Observers, and their caller reports each
	// arriving pod once (Place itself never learns).
	Typical Distribution
	// Popularity is the share of pods the typical shapes of online variants
	// cover (default 0.95).
	Popularity float64
	// Workers is how many goroutines one decision may use to score a
	// large cluster (thousands of nodes): 0 means up to GOMAXPROCS, and
	// only while that is measured to be faster than one (it is not when
	// other processes keep every core busy); 1 scores on the calling
	// goroutine; more always uses that many. Decisions are the same
	// whatever the value.
	Workers int
	// MIGFirstFit makes the default policy place MIG requests first fit
	// (first node, first GPU, lowest free start) instead of with its MIG
	// planner: the baseline the planner is measured against. Every other
	// policy always places MIG requests first fit.
	MIGFirstFit bool
}

// builder is one entry of the registry: a canonical name and how New
// builds the policy from Options.
type builder struct {
	name  string
	build func(o Options) Policy
}

// registry lists every policy New builds, baselines first. Adding a policy
// is one line here (and, for a policy with a chooser, its chooserRef
// method next to its type).
func registry() []builder {
	return []builder{
		{"random", func(o Options) Policy { return NewRandom(o.Seed) }},
		{"dotproduct", func(o Options) Policy { return NewDotProduct(o.Seed) }},
		{"gpuclustering", func(o Options) Policy { return NewGpuClustering(o.Seed) }},
		{"gpupacking", func(o Options) Policy { return NewGpuPacking(o.Seed) }},
		{"bestfit", func(o Options) Policy { return NewBestFit(o.Seed) }},
		{"spread", func(o Options) Policy { return NewSpread(o.Seed) }},
		{"fgd", func(o Options) Policy {
			if len(o.Typical) == 0 {
				return onlineFGD("fgd", o)
			}
			return NewFGD(o.Typical, o.Seed)
		}},
		{"fgd-online", func(o Options) Policy { return onlineFGD("fgd-online", o) }},
		{"tessera", func(o Options) Policy {
			if len(o.Typical) == 0 {
				return onlineTessera("tessera", o)
			}
			return NewTessera(o.Typical, o.Seed)
		}},
		{"tessera-online", func(o Options) Policy { return onlineTessera("tessera-online", o) }},
	}
}

func onlineFGD(name string, o Options) Policy {
	p := NewFGD(nil, o.Seed)
	return &online{Policy: p, name: name, popularity: o.Popularity, refresh: 256, rebuild: func(d Distribution) { p.frag, p.dist = newFragMeter(d), d }}
}

func onlineTessera(name string, o Options) Policy {
	p := NewTessera(nil, o.Seed)
	return &online{Policy: p, name: name, popularity: o.Popularity, refresh: 256, rebuild: p.setDistribution}
}

// Names lists the policies New knows by their canonical names, baselines
// first. New also takes the aliases Canonical resolves ("default" among them).
func Names() []string {
	var names []string
	for _, b := range registry() {
		names = append(names, b.name)
	}
	return names
}

// DefaultPolicy is the canonical name of Tessera's default policy.
const DefaultPolicy = "tessera"

// DefaultAlias names the default policy wherever a policy is named (sim
// --policy, up --policy, the scheduler's --policy, the per-pod annotation
// tessera.io/placement-policy); Canonical turns it into DefaultPolicy.
const DefaultAlias = "default"

// Canonical returns the canonical name (one of Names) of the policy name
// calls, which may be written in any case, with surrounding spaces, or as an
// alias: "default" (DefaultPolicy), "dotprod", "clustering", "packing" or
// "binpack". Everything that records or prints a policy name uses the
// canonical one, so "default" and "tessera" are one policy in every output.
func Canonical(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case DefaultAlias:
		n = DefaultPolicy
	case "dotprod":
		n = "dotproduct"
	case "clustering":
		n = "gpuclustering"
	case "packing", "binpack":
		n = "gpupacking"
	}
	if !slices.Contains(Names(), n) {
		return "", fmt.Errorf("unknown policy %q: want one of %s, or %s (the default, %s)", name, strings.Join(Names(), ", "), DefaultAlias, DefaultPolicy)
	}
	return n, nil
}

// New builds the named policy; name is a canonical name or an alias (see
// Canonical), and the policy's Name is the canonical one.
func New(name string, o Options) (Policy, error) {
	p, err := newPolicy(name, o)
	if err == nil && o.MIGFirstFit {
		if t := tesseraOf(p); t != nil {
			t.migFirstFit, t.ch.mig = true, nil
		}
	}
	if err == nil && o.Workers != 0 {
		if ch := chooserOf(p); ch != nil {
			ch.workers = o.Workers
		}
	}
	return p, err
}

// chooserRef is implemented by the policies that choose with a chooser
// (and by online, which forwards to the policy it wraps).
type chooserRef interface{ chooserRef() *chooser }

// chooserOf returns the chooser inside a policy New builds, or nil.
func chooserOf(p Policy) *chooser {
	if c, ok := p.(chooserRef); ok {
		return c.chooserRef()
	}
	return nil
}

// typicalRef is implemented by the policies that place against a
// typical-pod distribution.
type typicalRef interface{ typical() Distribution }

// TypicalOf returns a copy of the typical-pod distribution p places
// against (for a policy that learns online, what it has learned so far),
// or nil for a policy that uses none. Fragmentation as the simulator
// measures it (ClusterFragmentation) is against this distribution.
func TypicalOf(p Policy) Distribution {
	if t, ok := p.(typicalRef); ok {
		return slices.Clone(t.typical())
	}
	return nil
}

// tesseraOf returns the default policy inside a policy New builds, or nil.
func tesseraOf(p Policy) *Tessera {
	switch x := p.(type) {
	case *Tessera:
		return x
	case *online:
		return tesseraOf(x.Policy)
	}
	return nil
}

func newPolicy(name string, o Options) (Policy, error) {
	canonical, err := Canonical(name)
	if err != nil {
		return nil, err
	}
	if o.Popularity <= 0 {
		o.Popularity = 0.95
	}
	for _, b := range registry() {
		if b.name == canonical {
			return b.build(o), nil
		}
	}
	// Unreachable: Canonical accepts only the registry's names.
	return nil, fmt.Errorf("policy %q: known by name but not built here", canonical)
}
