package nvmlgpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/inventory"
)

// TestDiscoverUnsupported checks that a call the device does not support
// (NOT_SUPPORTED, or a function the driver lacks) leaves its field unknown.
func TestDiscoverUnsupported(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(lib *mock.Interface, d *mock.Device, ret nvml.Return)
		check   func(n inventory.Node) bool
	}{
		{"uuid", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetUUIDFunc = func() (string, nvml.Return) { return "junk", ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].UUID == "" }},
		{"name", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetNameFunc = func() (string, nvml.Return) { return "junk", ret }
		}, func(n inventory.Node) bool {
			return n.GPUs[0].Product == "" && n.GPUs[0].Model == "" && n.GPUs[0].SMCount == 0
		}},
		{"memory v2 falls back", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 1}, ret }
		}, func(n inventory.Node) bool {
			return n.GPUs[0].MemoryMiB == fakeTotalMiB && n.GPUs[0].MemoryUsedMiB == 2048
		}},
		{"memory", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 1}, ret }
			d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 1}, ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].MemoryMiB == 0 && n.GPUs[0].MemoryUsedMiB == 0 }},
		{"compute capability", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 1, 1, ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].ComputeCapability == "" }},
		{"numa", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) { return []uint{1}, ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].NUMANode == -1 }},
		{"pci", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: cChars("junk")}, ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].PCIBusID == "" }},
		{"mig", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMigModeFunc = func() (int, int, nvml.Return) { return 1, 1, ret }
		}, func(n inventory.Node) bool { return n.GPUs[0].MIGMode == inventory.MIGUnsupported }},
		{"topology", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return nvml.TOPOLOGY_SINGLE, ret }
		}, func(n inventory.Node) bool { return len(n.Links) == 0 }},
		{"driver version", func(lib *mock.Interface, _ *mock.Device, ret nvml.Return) {
			lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "junk", ret }
		}, func(n inventory.Node) bool { return n.DriverVersion == "" }},
		{"cuda version", func(lib *mock.Interface, _ *mock.Device, ret nvml.Return) {
			lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12080, ret }
		}, func(n inventory.Node) bool { return n.CUDAVersion == "" }},
	}
	for _, tt := range tests {
		for _, ret := range []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND} {
			t.Run(tt.name+"/"+ret.Error(), func(t *testing.T) {
				d0 := fakeDevice(0)
				lib := fakeLib(d0, fakeDevice(1))
				tt.breakIt(lib, d0, ret)
				nodes, err := newTestSource(lib).Discover(context.Background())
				if err != nil {
					t.Fatalf("Discover: %v", err)
				}
				if !tt.check(nodes[0]) {
					t.Errorf("field not unknown: %+v", nodes[0])
				}
				if g := nodes[0].GPUs[0]; g.Health != inventory.Healthy || g.Index != 0 || g.Vendor != "NVIDIA" {
					t.Errorf("GPU 0 = %+v", g)
				}
			})
		}
	}
}

// TestDiscoverErrors checks that other failures stop discovery with an error
// naming the GPU and the call, and wrapping the NVML return code.
func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		call    string
		breakIt func(lib *mock.Interface, d *mock.Device, ret nvml.Return)
		where   string
	}{
		{"GetUUID", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetUUIDFunc = func() (string, nvml.Return) { return "", ret }
		}, "GPU 1"},
		{"GetName", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetNameFunc = func() (string, nvml.Return) { return "", ret }
		}, "GPU 1"},
		{"GetMemoryInfo_v2", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, ret }
		}, "GPU 1"},
		{"GetCudaComputeCapability", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, ret }
		}, "GPU 1"},
		{"GetMemoryAffinity", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) { return nil, ret }
		}, "GPU 1"},
		{"GetPciInfo", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, ret }
		}, "GPU 1"},
		{"GetMigMode", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, ret }
		}, "GPU 1"},
		{"GetNvLinkState(0)", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, ret }
		}, "GPU 1"},
		{"GetTopologyCommonAncestor", func(_ *mock.Interface, d *mock.Device, ret nvml.Return) {
			d.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return 0, ret }
		}, "GPUs 1 and 2"},
		{"DeviceGetHandleByIndex", func(lib *mock.Interface, _ *mock.Device, ret nvml.Return) {
			lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { return nil, ret }
		}, "GPU 0"},
		{"DeviceGetCount", func(lib *mock.Interface, _ *mock.Device, ret nvml.Return) {
			lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, ret }
		}, "discover local GPUs"},
		{"SystemGetDriverVersion", func(lib *mock.Interface, _ *mock.Device, ret nvml.Return) {
			lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "", ret }
		}, "discover local GPUs"},
	}
	for _, tt := range tests {
		for _, ret := range []nvml.Return{nvml.ERROR_UNKNOWN, nvml.ERROR_GPU_IS_LOST} {
			t.Run(tt.call+"/"+ret.Error(), func(t *testing.T) {
				d1 := fakeDevice(1)
				lib := fakeLib(fakeDevice(0), d1, fakeDevice(2))
				tt.breakIt(lib, d1, ret)
				_, err := newTestSource(lib).Discover(context.Background())
				if err == nil {
					t.Fatal("Discover succeeded")
				}
				if !errors.Is(err, ret) || errors.Is(err, ErrUnavailable) {
					t.Errorf("err = %v, want it to wrap %v and not ErrUnavailable", err, ret)
				}
				if msg := err.Error(); !strings.Contains(msg, tt.where+":") || !strings.Contains(msg, tt.call) {
					t.Errorf("err = %q, want it to name %q and %q", msg, tt.where, tt.call)
				}
				if got := len(lib.ShutdownCalls()); got != 1 {
					t.Errorf("Shutdown called %d times, want 1", got)
				}
			})
		}
	}
}

func TestComputeCapability(t *testing.T) {
	tests := []struct {
		major, minor int
		want         string
	}{
		{9, 0, "9.0"}, {8, 6, "8.6"}, {10, 0, "10.0"}, {12, 1, "12.1"}, {7, 5, "7.5"},
	}
	for _, tt := range tests {
		d := fakeDevice(0)
		d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return tt.major, tt.minor, nvml.SUCCESS }
		got, err := computeCapability(d, "GPU 0")
		if err != nil || got != tt.want {
			t.Errorf("computeCapability(%d, %d) = %q, %v; want %q", tt.major, tt.minor, got, err, tt.want)
		}
	}
}

func TestSingleNode(t *testing.T) {
	tests := []struct {
		set  []uint
		want int
	}{
		{[]uint{1}, 0},
		{[]uint{1 << 3}, 3},
		{[]uint{0, 1 << 1}, 65},
		{[]uint{0}, -1},
		{nil, -1},
		{[]uint{0b11}, -1},
		{[]uint{1, 1}, -1},
	}
	for _, tt := range tests {
		if got := singleNode(tt.set); got != tt.want {
			t.Errorf("singleNode(%b) = %d, want %d", tt.set, got, tt.want)
		}
	}
}

func TestCString(t *testing.T) {
	id := cChars("00000000:18:00.0")
	if got := cString(id[:]); got != "00000000:18:00.0" {
		t.Errorf("cString = %q", got)
	}
	full := make([]int8, 4)
	for k := range full {
		full[k] = 'a'
	}
	if got := cString(full); got != "aaaa" {
		t.Errorf("cString without NUL = %q", got)
	}
}
