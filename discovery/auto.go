package discovery

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
)

// DefaultSimSpec is what the auto source simulates on a host without GPUs.
const DefaultSimSpec = "8xH200"

// Auto reads the local GPUs through NVML and falls back to a simulated host
// (fallbackSpec, e.g. DefaultSimSpec) when NVML is unavailable. It reports
// which one it used, so callers can print a clear banner; it never falls back
// silently on a real NVML error.
type Auto struct {
	local    Source
	fallback string
	cat      *catalog.Catalog
	name     string
}

// NewAuto returns an auto source.
func NewAuto(cat *catalog.Catalog, fallbackSpec string) *Auto {
	return &Auto{local: nvmlgpu.New(cat), fallback: fallbackSpec, cat: cat, name: "auto"}
}

// Name implements Source: "local" or "sim:SPEC" after Discover, "auto" before.
func (a *Auto) Name() string { return a.name }

// Simulated reports whether the last Discover fell back to simulated GPUs.
func (a *Auto) Simulated() bool { return a.name != "local" && a.name != "auto" }

// Discover implements Source.
func (a *Auto) Discover(ctx context.Context) ([]inventory.Node, error) {
	nodes, err := a.local.Discover(ctx)
	if err == nil {
		a.name = a.local.Name()
		return nodes, nil
	}
	if !IsUnavailable(err) {
		return nil, err
	}
	sim, serr := simulated.FromSpec(a.fallback, a.cat)
	if serr != nil {
		return nil, fmt.Errorf("no local GPUs (%v) and the simulated fallback is invalid: %w", err, serr)
	}
	a.name = sim.Name()
	return sim.Discover(ctx)
}
