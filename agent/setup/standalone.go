package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
)

// Standalone runs the agent's node side without Kubernetes: it discovers
// the GPUs, writes the inventory to out as indented JSON, and, for real GPUs
// (NVML), streams health events as JSON lines until ctx ends. It is how the
// agent's discovery and health watch are checked on a machine with a GPU.
func Standalone(ctx context.Context, o Options, out io.Writer) error {
	src, err := discovery.Open(o.Source, o.Catalog)
	if err != nil {
		return err
	}
	nodes, err := src.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover GPUs (%s): %w", o.Source, err)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(nodes); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	if len(nodes) != 1 || nodes[0].Source != "nvml" {
		return nil // simulated GPUs have no health events
	}
	line := json.NewEncoder(out)
	return nvmlgpu.New(o.Catalog).WatchHealth(ctx, func(ev nvmlgpu.HealthEvent) {
		if err := line.Encode(ev); err != nil {
			o.Log.Warn("write health event", "err", err)
		}
	})
}
