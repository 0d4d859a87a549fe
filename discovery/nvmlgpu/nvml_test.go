package nvmlgpu

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

func testCatalog() *catalog.Catalog { return catalog.Default() }

// modelOf is what Discover should report as Model and SMCount for a product:
// whatever the catalog says, so the test holds while the table grows.
func modelOf(product string) (string, int) {
	m, ok := testCatalog().Lookup(product)
	if !ok {
		return "", 0
	}
	return m.Name, m.SMCount
}

func TestDiscoverFakeServers(t *testing.T) {
	tests := []struct {
		name    string
		server  *server.Server
		nvlinks int // per GPU, all to NVSwitches
		driver  string
		cuda    string
		product string
		cc      string
	}{
		{"dgxh100", dgxh100.New(), 18, "550.54.15", "12.4", "NVIDIA H100 80GB HBM3", "9.0"},
		{"dgxh200", dgxh200.New(), 18, "550.54.15", "12.4", "NVIDIA H200 141GB HBM3e", "9.0"},
		{"dgxa100", dgxa100.New(), 12, "550.54.15", "12.4", "Mock NVIDIA A100-SXM4-40GB", "8.0"},
		{"dgxb200", dgxb200.New(), 18, "560.28.03", "12.6", "NVIDIA B200 180GB HBM3e", "10.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			completeServer(tt.server, tt.nvlinks)
			nodes, err := newTestSource(tt.server).Discover(context.Background())
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if len(nodes) != 1 {
				t.Fatalf("got %d nodes, want 1", len(nodes))
			}
			n := nodes[0]
			if err := n.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if n.Name != fakeHostname() || n.Source != "nvml" || n.DriverVersion != tt.driver || n.CUDAVersion != tt.cuda {
				t.Errorf("node = %q source %q driver %q cuda %q, want %q nvml %q %q",
					n.Name, n.Source, n.DriverVersion, n.CUDAVersion, fakeHostname(), tt.driver, tt.cuda)
			}
			if len(n.GPUs) != 8 {
				t.Fatalf("got %d GPUs, want 8", len(n.GPUs))
			}
			model, sms := modelOf(tt.product)
			for i, g := range n.GPUs {
				d := tt.server.Devices[i].(*server.Device)
				want := inventory.GPU{
					UUID: d.UUID, Index: i, Model: model, Product: tt.product, Vendor: "NVIDIA",
					MemoryMiB: int64(d.Config.MemoryMB), SMCount: sms, ComputeCapability: tt.cc,
					MIGMode: inventory.MIGDisabled, NUMANode: i / 4, PCIBusID: d.PciBusID, Health: inventory.Healthy,
				}
				if !reflect.DeepEqual(g, want) {
					t.Errorf("GPU %d = %+v\nwant %+v", i, g, want)
				}
			}
			if len(n.Links) != 28 {
				t.Fatalf("got %d links, want 28 (every pair)", len(n.Links))
			}
			for _, l := range n.Links {
				path := inventory.PCIeSystem
				if l.A/4 == l.B/4 {
					path = inventory.PCIeNUMANode
				}
				if l.NVLinks != tt.nvlinks || l.PCIe != path {
					t.Errorf("link %d-%d = NV%d %s, want NV%d %s", l.A, l.B, l.NVLinks, l.PCIe, tt.nvlinks, path)
				}
			}
		})
	}
}

func TestDiscoverFakeDevices(t *testing.T) {
	lib := fakeLib(fakeDevice(0), fakeDevice(1))
	nodes, err := newTestSource(lib).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	n := nodes[0]
	if n.DriverVersion != "570.133.20" || n.CUDAVersion != "12.8" {
		t.Errorf("driver %q cuda %q, want 570.133.20 12.8", n.DriverVersion, n.CUDAVersion)
	}
	g := n.GPUs[1]
	// Memory comes from GetMemoryInfo_v2, whose Used leaves out reserved memory.
	if g.MemoryMiB != fakeTotalMiB || g.MemoryUsedMiB != 1024 || g.PCIBusID != "00000000:19:00.0" || g.UUID != fakeUUID(1) {
		t.Errorf("GPU 1 = %+v", g)
	}
	if len(n.Links) != 1 || n.Links[0] != (inventory.Link{A: 0, B: 1, PCIe: inventory.PCIeSystem}) {
		t.Errorf("links = %+v, want one SYS link", n.Links)
	}
	if got := len(lib.ShutdownCalls()); got != 1 {
		t.Errorf("Shutdown called %d times, want 1", got)
	}
}

func TestDiscoverWithoutMemoryInfoV2Symbol(t *testing.T) {
	d := fakeDevice(0)
	d.GetMemoryInfo_v2Func = nil // would panic if called
	lib := fakeLib(d)
	withoutSymbols(lib, "nvmlDeviceGetMemoryInfo_v2")
	nodes, err := newTestSource(lib).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if g := nodes[0].GPUs[0]; g.MemoryMiB != fakeTotalMiB || g.MemoryUsedMiB != 2048 {
		t.Errorf("memory = %d/%d MiB, want 2048/%d from GetMemoryInfo", g.MemoryUsedMiB, g.MemoryMiB, fakeTotalMiB)
	}
}

func TestDiscoverInitFailure(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_LIB_RM_VERSION_MISMATCH} {
		t.Run(ret.Error(), func(t *testing.T) {
			lib := fakeLib()
			lib.InitFunc = func() nvml.Return { return ret }
			lib.ShutdownFunc = nil // must not be called
			_, err := newTestSource(lib).Discover(context.Background())
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ret) {
				t.Fatalf("err = %v, want ErrUnavailable wrapping %v", err, ret)
			}
			if !strings.Contains(err.Error(), ret.Error()) {
				t.Errorf("err = %q does not give the reason %q", err, ret.Error())
			}
		})
	}
}

func TestDiscoverCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lib := fakeLib(fakeDevice(0))
	if _, err := newTestSource(lib).Discover(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(lib.InitCalls()) != 0 {
		t.Errorf("NVML initialized for a cancelled context")
	}
}

func TestCUDAVersion(t *testing.T) {
	tests := []struct {
		in   int
		want string
	}{
		{12080, "12.8"}, {12040, "12.4"}, {11020, "11.2"}, {12000, "12.0"}, {13010, "13.1"}, {0, ""}, {-1, ""},
	}
	for _, tt := range tests {
		if got := cudaVersion(tt.in); got != tt.want {
			t.Errorf("cudaVersion(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDiscoverLocal runs against the real library: without an NVIDIA driver
// (as on CI) it must report ErrUnavailable, not panic; with one, a valid node.
func TestDiscoverLocal(t *testing.T) {
	nodes, err := New(catalog.Default()).Discover(context.Background())
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		t.Logf("no NVML here: %v", err)
		return
	}
	for _, n := range nodes {
		if err := n.Validate(); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
}

func TestNameAndNew(t *testing.T) {
	s := New(nil)
	if s.Name() != "local" || s.lib == nil {
		t.Errorf("New(nil) = %+v", s)
	}
}
