//go:build cgo

package catalog

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// TestNVMLMockServers asks go-nvml's mock servers (and the GPU configurations
// they are built from) for their product names, so that a go-nvml upgrade that
// renames a mock GPU fails here rather than in discovery. The nvml package
// needs cgo, hence the build tag; TestNVMLMockNamesResolve covers the same
// names without it.
func TestNVMLMockServers(t *testing.T) {
	known := nvmlMockProductNames()
	names := map[string]string{}
	for _, cfg := range []gpus.Config{
		gpus.A100_PCIE_40GB, gpus.A100_PCIE_80GB, gpus.A100_SXM4_40GB, gpus.A100_SXM4_80GB,
		gpus.A30_PCIE_24GB, gpus.H100_SXM5_80GB, gpus.H200_SXM5_141GB, gpus.B200_SXM5_180GB,
	} {
		names[cfg.Name] = "gpus config"
	}
	servers := map[string]interface {
		DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	}{
		"dgxa100": dgxa100.New(), "dgxh100": dgxh100.New(), "dgxh200": dgxh200.New(), "dgxb200": dgxb200.New(),
	}
	for label, s := range servers {
		dev, ret := s.DeviceGetHandleByIndex(0)
		if ret != nvml.SUCCESS {
			t.Fatalf("%s: DeviceGetHandleByIndex: %v", label, ret)
		}
		name, ret := dev.GetName()
		if ret != nvml.SUCCESS {
			t.Fatalf("%s: GetName: %v", label, ret)
		}
		names[name] = label
	}
	c := Default()
	for name, from := range names {
		if _, ok := known[name]; !ok {
			t.Errorf("%s reports %q, missing from nvmlMockProductNames", from, name)
		}
		if _, err := c.Resolve(name); err != nil {
			t.Errorf("%s reports %q: %v", from, name, err)
		}
	}
}
