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
	// "tessera" learn it from the pods they are asked to place (each Place
	// call counts once), as a scheduler that knows nothing in advance must.
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

// Names lists the policies New knows by their canonical names, baselines
// first. New also takes the aliases Canonical resolves ("default" among them).
func Names() []string {
	return []string{"random", "dotproduct", "gpuclustering", "gpupacking", "bestfit", "spread", "fgd", "fgd-online", "tessera", "tessera-online"}
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

// chooserOf returns the chooser inside a policy New builds, or nil.
func chooserOf(p Policy) *chooser {
	switch x := p.(type) {
	case *Random:
		return &x.ch
	case *DotProduct:
		return &x.ch
	case *GpuClustering:
		return &x.ch
	case *GpuPacking:
		return &x.ch
	case *BestFit:
		return &x.ch
	case *Spread:
		return &x.ch
	case *FGD:
		return &x.ch
	case *Tessera:
		return &x.ch
	case *online:
		return chooserOf(x.Policy)
	case selfLearning:
		return chooserOf(x.o.Policy)
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
	case selfLearning:
		return tesseraOf(x.o.Policy)
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
	switch canonical {
	case "random":
		return NewRandom(o.Seed), nil
	case "dotproduct":
		return NewDotProduct(o.Seed), nil
	case "gpuclustering":
		return NewGpuClustering(o.Seed), nil
	case "gpupacking":
		return NewGpuPacking(o.Seed), nil
	case "bestfit":
		return NewBestFit(o.Seed), nil
	case "spread":
		return NewSpread(o.Seed), nil
	case "fgd":
		if len(o.Typical) == 0 {
			p := NewFGD(nil, o.Seed)
			return selfLearning{&online{Policy: p, popularity: o.Popularity, refresh: 256, rebuild: func(d Distribution) { p.frag = newFragMeter(d) }}}, nil
		}
		return NewFGD(o.Typical, o.Seed), nil
	case "fgd-online":
		p := NewFGD(nil, o.Seed)
		return &online{Policy: p, popularity: o.Popularity, refresh: 256, rebuild: func(d Distribution) { p.frag = newFragMeter(d) }}, nil
	case "tessera":
		if len(o.Typical) == 0 {
			p := NewTessera(nil, o.Seed)
			return selfLearning{&online{Policy: p, popularity: o.Popularity, refresh: 256, rebuild: p.setDistribution}}, nil
		}
		return NewTessera(o.Typical, o.Seed), nil
	case "tessera-online":
		p := NewTessera(nil, o.Seed)
		return &online{Policy: p, popularity: o.Popularity, refresh: 256, rebuild: p.setDistribution}, nil
	}
	// Unreachable while every name in Names has a case above (TestNamesRoundTrip).
	return nil, fmt.Errorf("policy %q: known by name but not built here", canonical)
}
