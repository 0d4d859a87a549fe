package cdi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
)

const (
	gpu0 = "GPU-00000000-1111-2222-3333-444444444444"
	gpu1 = "GPU-11111111-1111-2222-3333-444444444444"
	migA = "MIG-aaaaaaaa-1111-2222-3333-444444444444"
	migB = "MIG-bbbbbbbb-1111-2222-3333-444444444444"
)

// testNode has a whole GPU (minor 0) and a GPU in MIG mode (minor 3) with
// two instances.
func testNode() inventory.Node {
	return inventory.Node{Name: "gpu-0", Source: "nvml", GPUs: []inventory.GPU{
		{UUID: gpu0, Index: 0, Model: "H100-SXM5-80GB", Vendor: "NVIDIA", MemoryMiB: 81559, MIGMode: inventory.MIGDisabled, NUMANode: 0, Health: inventory.Healthy},
		{UUID: gpu1, Index: 1, Model: "H100-SXM5-80GB", Vendor: "NVIDIA", MemoryMiB: 81559, MIGMode: inventory.MIGEnabled, NUMANode: 0, Health: inventory.Healthy,
			MIGInstances: []inventory.MIGInstance{{UUID: migA, Profile: "3g.40gb", MemoryMiB: 40192}, {UUID: migB, Profile: "1g.10gb", MemoryMiB: 9856}}},
	}}
}

// fakeNVML answers the calls Locate makes for testNode's units.
func fakeNVML() *mock.Interface {
	whole := func(minor int) *mock.Device {
		return &mock.Device{
			IsMigDeviceHandleFunc: func() (bool, nvml.Return) { return false, nvml.SUCCESS },
			GetMinorNumberFunc:    func() (int, nvml.Return) { return minor, nvml.SUCCESS },
		}
	}
	parent := whole(3)
	mig := func(gi, ci int) *mock.Device {
		return &mock.Device{
			IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
			GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
			GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return gi, nvml.SUCCESS },
			GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		}
	}
	devs := map[string]nvml.Device{gpu0: whole(0), gpu1: parent, migA: mig(1, 0), migB: mig(9, 0)}
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if d, ok := devs[uuid]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
}

// hostRoot makes a fake host with the driver's nodes and MIG minors.
func hostRoot(t *testing.T, uvm bool) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"dev/nvidiactl": "",
		"proc/driver/nvidia-caps/mig-minors": "config 1\nmonitor 2\ngpu3/gi1/access 30\ngpu3/gi1/ci0/access 31\n" +
			"gpu3/gi9/access 120\ngpu3/gi9/ci0/access 121\ngpu0/gi1/access 3\n",
	}
	if uvm {
		files["dev/nvidia-uvm"] = ""
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const baseSpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: all
    containerEdits:
      deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  deviceNodes:
    - {path: /dev/nvidiactl}
  hooks:
    - hookName: createContainer
      path: /usr/bin/nvidia-cdi-hook
      args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
    - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20
      containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20
      options: [ro, nosuid, nodev, bind]
`

func TestGenerateWritesWholeGPUsAndMIGInstances(t *testing.T) {
	root := hostRoot(t, true)
	base := filepath.Join(t.TempDir(), "nvidia.yaml")
	if err := os.WriteFile(base, []byte(baseSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cdi")
	path, err := cdi.Generate(fakeNVML(), testNode(), cdi.Options{Dir: dir, BaseSpec: base, HostRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, cdi.FileName) {
		t.Errorf("spec written to %s, want %s", path, filepath.Join(dir, cdi.FileName))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("spec file: %v %v, want mode 0644", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("spec folder holds %d entries, want only the spec (no temporary file)", len(entries))
	}
	data, _ := os.ReadFile(path)
	var got cdi.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("spec is not JSON: %v\n%s", err, data)
	}
	if got.Version != "0.6.0" || got.Kind != "tessera.io/gpu" {
		t.Errorf("cdiVersion %q kind %q, want 0.6.0 and tessera.io/gpu", got.Version, got.Kind)
	}
	nodes := func(paths ...string) cdi.ContainerEdits {
		var e cdi.ContainerEdits
		for _, p := range paths {
			e.DeviceNodes = append(e.DeviceNodes, cdi.DeviceNode{Path: p})
		}
		return e
	}
	want := []cdi.Device{
		{Name: gpu0, ContainerEdits: nodes("/dev/nvidia0")},
		{Name: migA, ContainerEdits: nodes("/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap30", "/dev/nvidia-caps/nvidia-cap31")},
		{Name: migB, ContainerEdits: nodes("/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap120", "/dev/nvidia-caps/nvidia-cap121")},
	}
	if !reflect.DeepEqual(got.Devices, want) {
		t.Errorf("devices\n%+v\nwant\n%+v", got.Devices, want)
	}
	// The base spec's edits are copied; control nodes are listed once.
	var paths []string
	for _, n := range got.ContainerEdits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	if !slices.Equal(paths, []string{"/dev/nvidiactl", "/dev/nvidia-uvm"}) {
		t.Errorf("common device nodes %v, want nvidiactl once and nvidia-uvm (nvidia-uvm-tools does not exist)", paths)
	}
	if len(got.ContainerEdits.Hooks) != 1 || got.ContainerEdits.Hooks[0].Args[1] != "update-ldcache" || len(got.ContainerEdits.Mounts) != 1 ||
		!slices.Equal(got.ContainerEdits.Env, []string{"NVIDIA_VISIBLE_DEVICES=void"}) {
		t.Errorf("common edits %+v, want the base spec's hook, mount and env", got.ContainerEdits)
	}
	// A physical GPU in MIG mode is not a device: only its instances are.
	for _, d := range got.Devices {
		if d.Name == gpu1 {
			t.Errorf("GPU %s in MIG mode is listed whole", gpu1)
		}
	}

	// Generating again replaces the file in place.
	if _, err := cdi.Generate(fakeNVML(), testNode(), cdi.Options{Dir: dir, HostRoot: root}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if strings.Contains(string(data), "libcuda") {
		t.Error("without a base spec the rewritten spec still carries the old base edits")
	}
}

// The names Allocate hands out (handoff.Build with CDIKind cdi.Kind) are
// exactly the spec's devices, for every unit the device plugin advertises.
func TestAllocateNamesAreTheSpecDevices(t *testing.T) {
	node := testNode()
	devs, err := agent.NewDevices(node, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range devs.Slots() {
		ids = append(ids, s.ID)
	}
	advertised, err := handoff.UnitsOf(ids)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(advertised)
	listed := cdi.UnitUUIDs(node)
	slices.Sort(listed)
	if !slices.Equal(slices.Compact(advertised), listed) {
		t.Fatalf("spec units %v differ from the device plugin's units %v", listed, advertised)
	}
	dir := t.TempDir()
	path, err := cdi.Generate(fakeNVML(), node, cdi.Options{Dir: dir, HostRoot: hostRoot(t, false)})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var spec cdi.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	inSpec := map[string]bool{}
	for _, d := range spec.Devices {
		inSpec[spec.Kind+"="+d.Name] = true
	}
	h := handoff.Build(handoff.Paths{HostStateRoot: "/run/tessera/containers", CDI: true, CDIKind: cdi.Kind}, "tsr-k",
		[]binding.Share{{UUID: migB, Index: 1}, {UUID: gpu0, Index: 0}})
	if len(h.CDIDevices) != 2 {
		t.Fatalf("handoff CDI devices %v, want 2", h.CDIDevices)
	}
	for _, n := range h.CDIDevices {
		if !inSpec[n] || n != cdi.QualifiedName(strings.TrimPrefix(n, cdi.Kind+"=")) {
			t.Errorf("Allocate hands out %q, which the spec does not define (%v)", n, inSpec)
		}
	}
	if h.Env["NVIDIA_VISIBLE_DEVICES"] != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%q in CDI mode, want void", h.Env["NVIDIA_VISIBLE_DEVICES"])
	}
}

func TestGenerateErrors(t *testing.T) {
	noMIGMinors := t.TempDir()
	if err := os.MkdirAll(filepath.Join(noMIGMinors, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noMIGMinors, "dev/nvidiactl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failingInit := fakeNVML()
	failingInit.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	unknown := testNode()
	unknown.GPUs[0].UUID = "GPU-99999999-1111-2222-3333-444444444444"
	tests := []struct {
		name string
		lib  nvml.Interface
		node inventory.Node
		root string
		want string
	}{
		{"no NVML", failingInit, testNode(), hostRoot(t, true), "nvmlInit"},
		{"unknown UUID", fakeNVML(), unknown, hostRoot(t, true), "locate GPU-99999999-1111-2222-3333-444444444444 for the CDI spec: DeviceGetHandleByUUID"},
		{"no driver", fakeNVML(), testNode(), t.TempDir(), "driver control node"},
		{"no MIG minors", fakeNVML(), testNode(), noMIGMinors, "MIG instance " + migA},
	}
	for _, tc := range tests {
		_, err := cdi.Generate(tc.lib, tc.node, cdi.Options{Dir: t.TempDir(), HostRoot: tc.root})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	minors := cdi.MIGMinors{"gpu0/gi1/access": 3, "gpu0/gi1/ci0/access": 4}
	tests := []struct {
		name  string
		units []cdi.Unit
		want  string
	}{
		{"legacy MIG UUID", []cdi.Unit{{UUID: "MIG-GPU-0000/1/0", MIG: &cdi.MIGInstance{GI: 1}}}, `only letters, digits`},
		{"listed twice", []cdi.Unit{{UUID: gpu0}, {UUID: gpu0}}, "listed twice"},
		{"negative minor", []cdi.Unit{{UUID: gpu0, GPUMinor: -1}}, "GPU minor number must be >= 0"},
		{"capability missing", []cdi.Unit{{UUID: migA, MIG: &cdi.MIGInstance{GI: 2}}}, "no MIG capability gpu0/gi2/access"},
		{"compute instance missing", []cdi.Unit{{UUID: migA, MIG: &cdi.MIGInstance{GI: 1, CI: 1}}}, "no MIG capability gpu0/gi1/ci1/access"},
	}
	for _, tc := range tests {
		if _, err := cdi.Build(tc.units, minors, cdi.ContainerEdits{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	s, err := cdi.Build([]cdi.Unit{{UUID: gpu0}}, nil, cdi.ContainerEdits{AdditionalGIDs: []uint32{44}})
	if err != nil || s.Version != "0.7.0" {
		t.Errorf("spec with additionalGids: version %q, %v; want 0.7.0", s.Version, err)
	}
}

func TestParseMIGMinors(t *testing.T) {
	got, err := cdi.ParseMIGMinors(strings.NewReader("config 1\n\ngpu0/gi2/ci0/access 22\n"))
	if err != nil || !reflect.DeepEqual(got, cdi.MIGMinors{"config": 1, "gpu0/gi2/ci0/access": 22}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"gpu0/gi1/access\n", "gpu0/gi1/access x\n", "gpu0/gi1/access -1\n", "a b c\n"} {
		if _, err := cdi.ParseMIGMinors(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "mig-minors line 1") {
			t.Errorf("%q: error %v, want one naming line 1", bad, err)
		}
	}
}

func TestReadBaseEditsErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, spec, want string }{
		{"not a spec", "hello: world\n", "kind must be set"},
		{"own spec", "kind: tessera.io/gpu\ncdiVersion: 0.6.0\n", "is Tessera's own spec"},
		{"unknown edit", "kind: nvidia.com/gpu\ncontainerEdits:\n  rlimits: []\n", `unknown field "rlimits"`},
		{"not YAML", "kind: [\n", "base CDI spec"},
	}
	for i, tc := range tests {
		p := filepath.Join(dir, tc.name+".yaml")
		if err := os.WriteFile(p, []byte(tc.spec), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := cdi.ReadBaseEdits(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d %s: error %v, want %q", i, tc.name, err, tc.want)
		}
	}
	if _, err := cdi.ReadBaseEdits(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read base CDI spec") {
		t.Errorf("missing file: %v", err)
	}
}
