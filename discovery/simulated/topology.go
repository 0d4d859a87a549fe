package simulated

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/inventory"
)

// Topology presets for simulated nodes.
const (
	TopologyAuto     = "auto"     // nvswitch for SXM-style NVLink models, pairs for bridged PCIe cards, else pcie
	TopologyNVSwitch = "nvswitch" // every pair joined by the model's NVLinks (HGX/DGX boards)
	TopologyPairs    = "pairs"    // GPUs 2k and 2k+1 joined by an NVLink bridge, PCIe otherwise
	TopologyPCIe     = "pcie"     // PCIe only: pairs share a switch, halves share a NUMA node
	TopologyNone     = "none"     // no links listed (everything over SYS), one NUMA node
)

// layOut assigns NUMA nodes and links. With two or more GPUs the first half
// sits on NUMA node 0 and the second on node 1, as on two-socket servers.
func layOut(n *inventory.Node, terms []term, preset string) error {
	if preset == "" {
		preset = TopologyAuto
	}
	g := len(n.GPUs)
	half := (g + 1) / 2
	for i := range n.GPUs {
		n.GPUs[i].NUMANode = 0
		if g >= 2 && preset != TopologyNone {
			n.GPUs[i].NUMANode = i / half
		}
	}
	if preset == TopologyAuto {
		preset = autoPreset(terms)
	}
	nvlinks := 0
	if len(terms) > 0 {
		nvlinks = terms[0].model.NVLinks
	}
	switch preset {
	case TopologyNone:
		return nil
	case TopologyNVSwitch, TopologyPairs, TopologyPCIe:
	default:
		return fmt.Errorf("topology must be one of auto, nvswitch, pairs, pcie, none; got %q", preset)
	}
	if (preset == TopologyNVSwitch || preset == TopologyPairs) && nvlinks == 0 {
		return fmt.Errorf("topology %q needs an NVLink model; %s has none", preset, terms[0].model.Name)
	}
	for a := 0; a < g; a++ {
		for b := a + 1; b < g; b++ {
			l := inventory.Link{A: a, B: b, PCIe: pciePath(a, b, half)}
			switch {
			case preset == TopologyNVSwitch:
				l.NVLinks = nvlinks
			case preset == TopologyPairs && a/2 == b/2:
				l.NVLinks = nvlinks
			}
			n.Links = append(n.Links, l)
		}
	}
	return nil
}

func pciePath(a, b, half int) inventory.PCIePath {
	switch {
	case a/2 == b/2:
		return inventory.PCIeSingleSwitch
	case a/half == b/half:
		return inventory.PCIeNUMANode
	default:
		return inventory.PCIeSystem
	}
}

// autoPreset picks nvswitch for a node of one NVLink model in SXM form,
// pairs for bridged PCIe cards (PCIe and NVL variants), and pcie otherwise.
func autoPreset(terms []term) string {
	if len(terms) != 1 || terms[0].model.NVLinks == 0 || terms[0].count < 2 {
		return TopologyPCIe
	}
	name := strings.ToLower(terms[0].model.Name)
	if strings.Contains(name, "pcie") || strings.HasSuffix(name, "-nvl") {
		return TopologyPairs
	}
	return TopologyNVSwitch
}
