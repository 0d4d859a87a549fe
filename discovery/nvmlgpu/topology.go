package nvmlgpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/inventory"
)

// nvlinkCounts says how a GPU's active NVLinks end.
type nvlinkCounts struct {
	toGPU    map[int]int // links straight to another GPU of the node, by position
	toSwitch int         // links to an NVSwitch
}

// readLinks returns the link between every pair of GPUs: the NVLinks that
// join them and their closest common PCIe ancestor. GPUs that both reach
// NVSwitches are taken to share one NVSwitch fabric, as in DGX/HGX systems,
// and are joined by as many links as the one with fewer switch links has
// (nvidia-smi topo -m shows NV18 for every pair of a DGX H100). Pairs about
// which nothing is known are left out.
func (s *Source) readLinks(ctx context.Context, devs []nvml.Device, gpus []inventory.GPU) ([]inventory.Link, error) {
	byBus := make(map[string]int, len(gpus))
	for k, g := range gpus {
		if g.PCIBusID != "" {
			byBus[normBusID(g.PCIBusID)] = k
		}
	}
	counts := make([]nvlinkCounts, len(devs))
	for k, dev := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := s.nvlinks(dev, gpuAt(gpus[k].Index), k, byBus)
		if err != nil {
			return nil, err
		}
		counts[k] = c
	}
	var links []inventory.Link
	for a := range devs {
		for b := a + 1; b < len(devs); b++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			path, err := commonAncestor(devs[a], devs[b], gpus[a].Index, gpus[b].Index)
			if err != nil {
				return nil, err
			}
			nv := max(counts[a].toGPU[b], counts[b].toGPU[a])
			if counts[a].toSwitch > 0 && counts[b].toSwitch > 0 {
				nv += min(counts[a].toSwitch, counts[b].toSwitch)
			}
			if nv == 0 && path == "" {
				continue
			}
			links = append(links, inventory.Link{A: gpus[a].Index, B: gpus[b].Index, NVLinks: nv, PCIe: path})
		}
	}
	return links, nil
}

// nvlinks counts the active NVLinks of the GPU at position self and where
// they end; byBus maps normalized PCI bus ids to positions.
func (s *Source) nvlinks(dev nvml.Device, where string, self int, byBus map[string]int) (nvlinkCounts, error) {
	c := nvlinkCounts{toGPU: map[int]int{}}
	hasType := s.has("nvmlDeviceGetNvLinkRemoteDeviceType")
	for l := range nvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(l)
		if absent(ret) {
			continue // no such link, or no NVLink at all
		}
		if ret != nvml.SUCCESS {
			return c, callErr(where, fmt.Sprintf("GetNvLinkState(%d)", l), ret)
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		pci, ret := dev.GetNvLinkRemotePciInfo(l)
		if absent(ret) {
			continue
		}
		if ret != nvml.SUCCESS {
			return c, callErr(where, fmt.Sprintf("GetNvLinkRemotePciInfo(%d)", l), ret)
		}
		if k, ok := byBus[normBusID(cString(pci.BusId[:]))]; ok {
			if k != self {
				c.toGPU[k]++
			}
			continue
		}
		remote := nvml.NVLINK_DEVICE_TYPE_UNKNOWN
		if hasType {
			t, ret := dev.GetNvLinkRemoteDeviceType(l)
			switch {
			case ret == nvml.SUCCESS:
				remote = t
			case !absent(ret):
				return c, callErr(where, fmt.Sprintf("GetNvLinkRemoteDeviceType(%d)", l), ret)
			}
		}
		// A remote end that is no GPU of this node is a switch unless NVML
		// says otherwise (a GPU hidden from this process, an IBM NPU).
		if remote == nvml.NVLINK_DEVICE_TYPE_SWITCH || remote == nvml.NVLINK_DEVICE_TYPE_UNKNOWN {
			c.toSwitch++
		}
	}
	return c, nil
}

// commonAncestor returns the PCIe path between two GPUs, "" when unknown.
func commonAncestor(a, b nvml.Device, ia, ib int) (inventory.PCIePath, error) {
	level, ret := a.GetTopologyCommonAncestor(b)
	switch {
	case ret == nvml.SUCCESS:
		return pciePath(level), nil
	case unsupported(ret):
		return "", nil
	default:
		return "", callErr(fmt.Sprintf("GPUs %d and %d", ia, ib), "GetTopologyCommonAncestor", ret)
	}
}

// pciePath maps an NVML topology level to the nvidia-smi name of the path.
func pciePath(level nvml.GpuTopologyLevel) inventory.PCIePath {
	switch level {
	case nvml.TOPOLOGY_INTERNAL:
		return inventory.PCIeSameBoard
	case nvml.TOPOLOGY_SINGLE:
		return inventory.PCIeSingleSwitch
	case nvml.TOPOLOGY_MULTIPLE:
		return inventory.PCIeMultipleSwitch
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return inventory.PCIeHostBridge
	case nvml.TOPOLOGY_NODE:
		return inventory.PCIeNUMANode
	case nvml.TOPOLOGY_SYSTEM:
		return inventory.PCIeSystem
	default:
		return ""
	}
}

// normBusID puts a PCI bus id in one form ("0000:18:00.0"), whether NVML
// wrote its domain with 8 digits or 4 and in either case.
func normBusID(id string) string {
	var domain, bus, device, function uint
	if n, err := fmt.Sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function); err == nil && n == 4 {
		return fmt.Sprintf("%04x:%02x:%02x.%x", domain, bus, device, function)
	}
	return strings.ToLower(id)
}
