package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
)

// Source reports the GPUs of one or more nodes.
type Source interface {
	// Name is a short description of the source for humans ("sim:8xH200", "local").
	Name() string
	// Discover reads the current inventory.
	Discover(ctx context.Context) ([]inventory.Node, error)
}

// ErrUnavailable is returned (wrapped) by Open and Discover when a source
// cannot be used on this machine, e.g. "local" without an NVIDIA driver.
var ErrUnavailable = nvmlgpu.ErrUnavailable

// SourceHelp describes the accepted source strings, for flag help texts.
const SourceHelp = `inventory source: "auto" (local GPUs, else a simulated 8xH200 host), "local" (NVML on this host), "sim:SPEC" (simulated, e.g. sim:8xH200 or sim:4xA100-80GB+2xL4), "sim:FILE.yaml" (simulated nodes from a file)`

// Open returns the Source a source string names:
//
//	auto             NVML on this host, else a simulated DefaultSimSpec host
//	local            NVML on this host
//	sim:8xH200       one simulated node from a spec
//	sim:nodes.yaml   simulated nodes from a YAML file
//
// The catalog resolves model names.
func Open(source string, cat *catalog.Catalog) (Source, error) {
	kind, arg, _ := strings.Cut(source, ":")
	switch kind {
	case "auto":
		if arg != "" {
			return nil, fmt.Errorf("source %q: auto takes no argument", source)
		}
		return NewAuto(cat, DefaultSimSpec), nil
	case "local":
		if arg != "" {
			return nil, fmt.Errorf("source %q: local takes no argument", source)
		}
		return nvmlgpu.New(cat), nil
	case "sim":
		if arg == "" {
			return nil, fmt.Errorf("source %q: sim needs a spec such as sim:8xH200 or a file such as sim:nodes.yaml", source)
		}
		if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") {
			return simulated.FromFile(arg, cat)
		}
		return simulated.FromSpec(arg, cat)
	case "kube":
		return nil, fmt.Errorf("source %q: the Kubernetes source is not available yet; use local or sim:SPEC", source)
	default:
		return nil, fmt.Errorf("source %q: must be one of auto, local, sim:SPEC, sim:FILE.yaml", source)
	}
}

// IsUnavailable reports whether err says the source cannot be used here.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
