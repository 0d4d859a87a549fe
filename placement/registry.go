package placement

import (
	"fmt"
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
}

// Names lists the policies New knows, baselines first.
func Names() []string {
	return []string{"random", "dotproduct", "gpuclustering", "gpupacking", "bestfit", "spread", "fgd", "fgd-online", "tessera", "tessera-online"}
}

// DefaultPolicy is the name of Tessera's default policy.
const DefaultPolicy = "tessera"

// New builds the named policy.
func New(name string, o Options) (Policy, error) {
	if o.Popularity <= 0 {
		o.Popularity = 0.95
	}
	switch strings.ToLower(name) {
	case "random":
		return NewRandom(o.Seed), nil
	case "dotproduct", "dotprod":
		return NewDotProduct(o.Seed), nil
	case "gpuclustering", "clustering":
		return NewGpuClustering(o.Seed), nil
	case "gpupacking", "packing", "binpack":
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
	return nil, fmt.Errorf("unknown policy %q: want one of %s", name, strings.Join(Names(), ", "))
}
