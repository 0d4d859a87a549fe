package cdi_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
)

// TestGenerateOnThisHost writes the spec for the real GPUs of this host; it
// is skipped where NVML cannot be loaded (every machine without a driver).
func TestGenerateOnThisHost(t *testing.T) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Skipf("no NVML here: %v", ret)
	}
	lib.Shutdown()
	nodes, err := nvmlgpu.New(catalog.Default()).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	path, err := cdi.Generate(lib, nodes[0], cdi.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var spec cdi.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Devices) != len(cdi.UnitUUIDs(nodes[0])) {
		t.Fatalf("spec has %d devices for %d units:\n%s", len(spec.Devices), len(cdi.UnitUUIDs(nodes[0])), data)
	}
	for _, d := range spec.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			if _, err := os.Stat(n.Path); err != nil && !strings.HasPrefix(n.Path, "/dev/nvidia-caps/") {
				t.Errorf("device %s: node %s: %v", d.Name, n.Path, err)
			}
		}
	}
	t.Logf("%s", data)
}
