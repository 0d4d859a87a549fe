package nvmlgpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeTotalMiB is the memory of a fakeDevice.
const fakeTotalMiB = 81920

// fakeDevice returns a mock GPU at position i answering every call Discover
// makes: an H100 SXM with MIG disabled, no NVLink, on NUMA node i/4, and
// connected to every other GPU through the system (SYS).
func fakeDevice(i int) *mock.Device {
	d := &mock.Device{}
	d.GetUUIDFunc = func() (string, nvml.Return) { return fakeUUID(i), nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS }
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: fakeTotalMiB << 20, Reserved: 512 << 20, Used: 1024 << 20}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: fakeTotalMiB << 20, Used: 2048 << 20}, nvml.SUCCESS
	}
	d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 9, 0, nvml.SUCCESS }
	d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
		return []uint{1 << uint(i/4)}, nvml.SUCCESS
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{BusId: cChars(fakeBusID(i))}, nvml.SUCCESS
	}
	d.GetMigModeFunc = func() (int, int, nvml.Return) {
		return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
	return d
}

func fakeUUID(i int) string     { return fmt.Sprintf("GPU-%08d-1111-2222-3333-444444444444", i) }
func fakeBusID(i int) string    { return fmt.Sprintf("00000000:%02X:00.0", 0x18+i) }
func fakeHostname() string      { return "gpu-node-1" }
func fakeHost() (string, error) { return fakeHostname(), nil }

// fakeLib returns a mock NVML with the given devices; every symbol exists.
func fakeLib(devs ...*mock.Device) *mock.Interface {
	lib := &mock.Interface{}
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "570.133.20", nvml.SUCCESS }
	lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12080, nvml.SUCCESS }
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return len(devs), nvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(devs) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return devs[i], nvml.SUCCESS
	}
	ext := &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
	lib.ExtensionsFunc = func() nvml.ExtendedInterface { return ext }
	return lib
}

// withoutSymbols makes lib report the named symbols as missing.
func withoutSymbols(lib *mock.Interface, names ...string) {
	ext := &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
		for _, n := range names {
			if n == name {
				return errors.New("undefined symbol: " + name)
			}
		}
		return nil
	}}
	lib.ExtensionsFunc = func() nvml.ExtendedInterface { return ext }
}

// newTestSource returns a Source on lib with a fixed host name.
func newTestSource(lib nvml.Interface) *Source {
	s := NewWithInterface(lib, testCatalog())
	s.hostname = fakeHost
	s.waitTimeout = time.Millisecond
	return s
}

// cChars converts s to a NUL-terminated C char array.
func cChars(s string) [32]int8 {
	var out [32]int8
	for k := 0; k < len(s) && k < len(out)-1; k++ {
		out[k] = int8(s[k])
	}
	return out
}

// completeServer adds what go-nvml's fake DGX servers leave out: PCI bus ids,
// NUMA affinity (GPUs 0-3 on node 0, 4-7 on node 1), PCIe paths (NODE within
// a NUMA node, SYS across) and nvlinks active NVLinks per GPU to NVSwitches.
// GetMemoryInfo_v2 is unsupported, so GetMemoryInfo is used.
func completeServer(s *server.Server, nvlinks int) {
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		pci := d.GetPciInfoFunc
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p, ret := pci()
			p.BusId = cChars(d.PciBusID)
			return p, ret
		}
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
		d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
			return []uint{1 << uint(i/4)}, nvml.SUCCESS
		}
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			if o.(*server.Device).Index/4 == i/4 {
				return nvml.TOPOLOGY_NODE, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= nvlinks {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: cChars(fmt.Sprintf("00000000:%02X:00.0", 0xC0+l%4))}, nvml.SUCCESS
		}
		d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
	}
}
