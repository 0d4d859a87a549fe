package discovery

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// MarkMIGManaged marks the GPUs of node whose MIG layout the operator
// hands to Tessera (inventory.GPU.MIGManaged) from a flag's value: "" for
// none, "all" for every GPU in MIG mode, or a comma-separated list of GPU
// UUIDs. A GPU that is not in MIG mode is refused (Tessera never switches
// MIG mode; the operator does), and so are an unknown UUID and a model the
// catalog has no MIG placement rules for. Errors name flag, the value and
// why. It returns the managed GPUs' UUIDs in node order.
func MarkMIGManaged(node *inventory.Node, cat *catalog.Catalog, flag, value string) ([]string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	var want []string
	all := value == "all"
	if !all {
		for _, u := range strings.Split(value, ",") {
			u = strings.TrimSpace(u)
			if u == "" {
				return nil, fmt.Errorf("%s: must be all or a comma-separated list of GPU UUIDs, got %q (an empty entry)", flag, value)
			}
			if slices.Contains(want, u) {
				return nil, fmt.Errorf("%s: GPU %s is listed twice in %q", flag, u, value)
			}
			want = append(want, u)
		}
	}
	var known []string
	for _, g := range node.GPUs {
		known = append(known, g.UUID)
	}
	for _, u := range want {
		if !slices.Contains(known, u) {
			return nil, fmt.Errorf("%s %s: %s is not a GPU of this host (its GPUs: %s)", flag, value, u, strings.Join(known, ", "))
		}
	}
	var out []string
	for i := range node.GPUs {
		g := &node.GPUs[i]
		if !all && !slices.Contains(want, g.UUID) {
			continue
		}
		if g.MIGMode != inventory.MIGEnabled {
			if all {
				continue
			}
			return nil, fmt.Errorf("%s %s: GPU %d (%s, %s) is not in MIG mode (MIG mode %s); Tessera never switches MIG mode: enable it first (nvidia-smi -i %s -mig 1) or leave the GPU out", flag, value, g.Index, g.UUID, g.Model, migModeWord(g.MIGMode), g.UUID)
		}
		if m, ok := cat.Lookup(g.Model); !ok || !m.SupportsMIG() {
			return nil, fmt.Errorf("%s %s: GPU %d (%s) is a %s, for which the catalog has no MIG placement rules, so Tessera cannot create its instances", flag, value, g.Index, g.UUID, g.Model)
		}
		g.MIGManaged = true
		out = append(out, g.UUID)
	}
	if all && len(out) == 0 {
		return nil, fmt.Errorf("%s all: none of this host's %d GPUs is in MIG mode; Tessera never switches MIG mode: enable it first (nvidia-smi -mig 1)", flag, len(node.GPUs))
	}
	return out, nil
}

func migModeWord(m inventory.MIGMode) string {
	if m == "" {
		return "unsupported"
	}
	return string(m)
}
