package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
)

// TestCDISpecNamesWholeGPUsAndMIGInstances runs the agent with its own CDI
// spec on a node with a whole GPU and a GPU in MIG mode: the spec lists
// both units with their device nodes, and kubelet's Allocate hands each
// container the spec's name of exactly its unit.
func TestCDISpecNamesWholeGPUsAndMIGInstances(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	const mig = "MIG-5c1d2e3f-aaaa-bbbb-cccc-000000000001"
	g1 := &h.node.GPUs[1]
	g1.MIGMode = inventory.MIGEnabled
	g1.MIGInstances = []inventory.MIGInstance{{UUID: mig, Profile: "3g.40gb", MemoryMiB: 40192}}

	// The host: driver nodes, MIG capabilities of GPU minor 1, and NVML.
	root := t.TempDir()
	for p, data := range map[string]string{
		"dev/nvidiactl": "", "dev/nvidia-uvm": "",
		"proc/driver/nvidia-caps/mig-minors": "gpu1/gi2/access 21\ngpu1/gi2/ci0/access 22\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parent := &mock.Device{
		IsMigDeviceHandleFunc: func() (bool, nvml.Return) { return false, nvml.SUCCESS },
		GetMinorNumberFunc:    func() (int, nvml.Return) { return 1, nvml.SUCCESS },
	}
	devs := map[string]nvml.Device{
		h.node.GPUs[0].UUID: &mock.Device{
			IsMigDeviceHandleFunc: func() (bool, nvml.Return) { return false, nvml.SUCCESS },
			GetMinorNumberFunc:    func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		},
		mig: &mock.Device{
			IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
			GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
			GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return 2, nvml.SUCCESS },
			GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		},
	}
	lib := &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if d, ok := devs[uuid]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}

	cfg := h.config()
	specDir := filepath.Join(h.dir, "cdi")
	cfg.Paths.CDISpecDir, cfg.NVML, cfg.HostRoot = specDir, lib, root
	h.startAgent(cfg)

	data, err := os.ReadFile(filepath.Join(specDir, cdi.FileName))
	if err != nil {
		t.Fatalf("agent wrote no CDI spec: %v", err)
	}
	var spec cdi.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	devNodes := map[string][]string{}
	for _, d := range spec.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			devNodes[spec.Kind+"="+d.Name] = append(devNodes[spec.Kind+"="+d.Name], n.Path)
		}
	}
	wantNodes := map[string][]string{
		"tessera.io/gpu=" + h.node.GPUs[0].UUID: {"/dev/nvidia0"},
		"tessera.io/gpu=" + mig:                 {"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"},
	}
	for name, want := range wantNodes {
		if !slices.Equal(devNodes[name], want) {
			t.Errorf("spec device %s has nodes %v, want %v", name, devNodes[name], want)
		}
	}
	if len(devNodes) != len(wantNodes) {
		t.Errorf("spec devices %v, want exactly %v", devNodes, wantNodes)
	}

	for _, tc := range []struct {
		pod   string
		share binding.Share
	}{
		{"whole", h.share(0, 1000, 1000, 1024)},
		{"mig", binding.Share{UUID: mig, Index: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 40192, MemoryLimitMiB: 40192}},
	} {
		p := h.bind("team", tc.pod, oneGPU, map[string][]binding.Share{"main": {tc.share}})
		got, err := h.kubelet.Admit(context.Background(), p, kubeletsim.AdmitOptions{})
		if err != nil {
			t.Fatalf("admit %s: %v", tc.pod, err)
		}
		a := got["main"]
		want := []string{cdi.QualifiedName(tc.share.UUID)}
		if !slices.Equal(a.CDI, want) {
			t.Errorf("pod %s: CDI devices %v, want %v", tc.pod, a.CDI, want)
		}
		if _, ok := wantNodes[a.CDI[0]]; !ok {
			t.Errorf("pod %s: handed %s, which the spec does not define", tc.pod, a.CDI[0])
		}
		if a.Envs["NVIDIA_VISIBLE_DEVICES"] != "void" || a.Envs["CUDA_VISIBLE_DEVICES"] != tc.share.UUID {
			t.Errorf("pod %s: NVIDIA_VISIBLE_DEVICES=%q CUDA_VISIBLE_DEVICES=%q, want void and %s", tc.pod, a.Envs["NVIDIA_VISIBLE_DEVICES"], a.Envs["CUDA_VISIBLE_DEVICES"], tc.share.UUID)
		}
	}
}

func TestCDISpecFailureStopsTheAgent(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	cfg := h.config()
	cfg.Paths.CDISpecDir = filepath.Join(h.dir, "cdi")
	cfg.NVML = &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	cfg.HostRoot = t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg.HostRoot, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.HostRoot, "dev/nvidiactl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.New(cfg); err == nil || !strings.Contains(err.Error(), "agent: CDI spec: locate GPUs for the CDI spec: nvmlInit") {
		t.Errorf("agent.New without NVML: %v, want a CDI spec error", err)
	}
	cfg.Paths.CDISpecDir = "relative/cdi"
	if _, err := agent.New(cfg); err == nil || !strings.Contains(err.Error(), `CDI spec dir: must be an absolute path, got "relative/cdi"`) {
		t.Errorf("relative spec dir: %v", err)
	}
}
