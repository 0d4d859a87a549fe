package migctl

import (
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// ForNode builds the manager of node's GPUs marked MIGManaged: through
// the host's NVML for real GPUs (initialised until the returned close is
// called), or, when simulated, through a simulated driver (migsim) that
// holds each GPU's configured instances at their starts. It returns nil
// when no GPU is managed.
func ForNode(node inventory.Node, cat *catalog.Catalog, simulated bool) (*Manager, func(), error) {
	specs := map[string]*catalog.MIGSpec{}
	for _, g := range node.GPUs {
		if !g.MIGManaged {
			continue
		}
		m, ok := cat.Lookup(g.Model)
		if !ok || !m.SupportsMIG() {
			return nil, nil, fmt.Errorf("GPU %d (%s): the catalog has no MIG placement rules for %s", g.Index, g.UUID, g.Model)
		}
		specs[g.UUID] = m.MIG
	}
	if len(specs) == 0 {
		return nil, func() {}, nil
	}
	if simulated {
		var gpus []GPU
		for i, g := range node.GPUs {
			spec, ok := specs[g.UUID]
			if !ok {
				continue
			}
			dev := migsim.NewGPU(spec, g.UUID, i)
			for _, in := range g.MIGInstances {
				if in.Start == nil {
					continue
				}
				if _, err := Create(dev, spec, in.Profile, *in.Start); err != nil {
					return nil, nil, fmt.Errorf("simulated GPU %d: instance %s at %d: %w", g.Index, in.Profile, *in.Start, err)
				}
			}
			gpus = append(gpus, GPU{UUID: g.UUID, Device: dev, Spec: spec})
		}
		return NewManager(gpus), func() {}, nil
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("NVML: nvmlInit: %s", nvml.ErrorString(ret))
	}
	gpus, err := Open(lib, specs)
	if err != nil {
		lib.Shutdown()
		return nil, nil, err
	}
	return NewManager(gpus), func() {
		if ret := lib.Shutdown(); ret != nvml.SUCCESS {
			slog.Debug("nvml shutdown failed", "error", nvml.ErrorString(ret))
		}
	}, nil
}
