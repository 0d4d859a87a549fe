package nvmlgpu

import (
	"fmt"
	"math/bits"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// maxNUMANodes is how many NUMA nodes the memory-affinity query asks about.
const maxNUMANodes = 64

// readGPU reads one physical GPU. A call the device does not support leaves
// its field unknown ("", 0, -1 for NUMANode, MIGUnsupported); any other
// failure is returned naming the GPU index and the call.
func (s *Source) readGPU(dev nvml.Device, i int) (inventory.GPU, error) {
	where := gpuAt(i)
	g := inventory.GPU{
		Index:    i,
		Vendor:   string(catalog.NVIDIA),
		MIGMode:  inventory.MIGUnsupported,
		NUMANode: -1,
		Health:   inventory.Healthy,
	}
	var err error
	if g.UUID, _, err = get(where, "GetUUID", dev.GetUUID); err != nil {
		return g, err
	}
	if g.Product, _, err = get(where, "GetName", dev.GetName); err != nil {
		return g, err
	}
	if s.cat != nil && g.Product != "" {
		if m, ok := s.cat.Lookup(g.Product); ok {
			g.Model = m.Name
			// NVML has no SM count for a whole GPU (GetAttributes only
			// answers for MIG devices), so the datasheet value is used.
			g.SMCount = m.SMCount
		}
	}
	if g.MemoryMiB, g.MemoryUsedMiB, err = s.readMemory(dev, where); err != nil {
		return g, err
	}
	if g.ComputeCapability, err = computeCapability(dev, where); err != nil {
		return g, err
	}
	if g.NUMANode, err = numaNode(dev, where); err != nil {
		return g, err
	}
	pci, ok, err := get(where, "GetPciInfo", dev.GetPciInfo)
	if err != nil {
		return g, err
	}
	if ok {
		g.PCIBusID = cString(pci.BusId[:])
	}
	if g.MIGMode, g.MIGInstances, err = s.readMIG(dev, where, g.MemoryMiB); err != nil {
		return g, err
	}
	return g, nil
}

// readMemory returns total and used memory in MiB, from GetMemoryInfo_v2
// where the driver has it (its Used leaves out memory the driver reserves, as
// nvidia-smi shows it), else from GetMemoryInfo.
func (s *Source) readMemory(dev nvml.Device, where string) (total, used int64, err error) {
	if s.has("nvmlDeviceGetMemoryInfo_v2") {
		m, ret := dev.GetMemoryInfo_v2()
		switch {
		case ret == nvml.SUCCESS:
			return mib(m.Total), mib(m.Used), nil
		case unsupported(ret) || ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			// fall back to the first version below
		default:
			return 0, 0, callErr(where, "GetMemoryInfo_v2", ret)
		}
	}
	m, _, err := get(where, "GetMemoryInfo", dev.GetMemoryInfo)
	if err != nil {
		return 0, 0, err
	}
	return mib(m.Total), mib(m.Used), nil
}

// computeCapability returns the CUDA compute capability as "major.minor".
func computeCapability(dev nvml.Device, where string) (string, error) {
	major, minor, ret := dev.GetCudaComputeCapability()
	switch {
	case ret == nvml.SUCCESS:
		return fmt.Sprintf("%d.%d", major, minor), nil
	case unsupported(ret):
		return "", nil
	default:
		return "", callErr(where, "GetCudaComputeCapability", ret)
	}
}

// numaNode returns the host NUMA node nearest the GPU (NVML memory affinity
// at node scope, the "NUMA Affinity" of nvidia-smi topo -m), or -1 when it is
// unknown or not a single node. GetNumaNodeId is not used: it answers only
// where the GPU's own memory is a NUMA node (Grace Hopper), which is not the
// host node the GPU is attached to.
func numaNode(dev nvml.Device, where string) (int, error) {
	set, ret := dev.GetMemoryAffinity(maxNUMANodes, nvml.AFFINITY_SCOPE_NODE)
	switch {
	case ret == nvml.SUCCESS:
		return singleNode(set), nil
	case unsupported(ret):
		return -1, nil
	default:
		return -1, callErr(where, "GetMemoryAffinity", ret)
	}
}

// singleNode returns the one node set in a node bitmask, or -1 when none or
// several are set.
func singleNode(set []uint) int {
	node := -1
	for w, word := range set {
		for word != 0 {
			if node >= 0 {
				return -1
			}
			node = w*bits.UintSize + bits.TrailingZeros(word)
			word &= word - 1
		}
	}
	return node
}

// mib converts bytes to MiB.
func mib(b uint64) int64 { return int64(b >> 20) }

// cString converts a NUL-terminated C char array to a string.
func cString(cs []int8) string {
	b := make([]byte, 0, len(cs))
	for _, c := range cs {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
