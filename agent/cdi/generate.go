package cdi

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/inventory"
)

// Options say where the spec goes and what it builds on.
type Options struct {
	// Dir is the spec folder (DefaultDir when empty).
	Dir string
	// BaseSpec, optional, is a CDI spec file whose top-level edits (driver
	// libraries, hooks) are copied, e.g. /var/run/cdi/nvidia.yaml.
	BaseSpec string
	// HostRoot is where the host's /dev and /proc are seen ("/" when empty).
	HostRoot string
}

// controlNodes are the driver's device nodes every CUDA container needs;
// /dev/nvidiactl is required, the UVM nodes are added when they exist.
func controlNodes() []string {
	return []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
}

// ControlNodes returns the driver's control nodes present under hostRoot
// ("/" when empty): /dev/nvidiactl, which must exist, and the UVM nodes
// that do.
func ControlNodes(hostRoot string) ([]string, error) {
	if hostRoot == "" {
		hostRoot = "/"
	}
	var nodes []string
	for i, p := range controlNodes() {
		_, err := os.Stat(filepath.Join(hostRoot, p))
		switch {
		case err == nil:
			nodes = append(nodes, p)
		case i == 0 || !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("driver control node: %w", err)
		}
	}
	return nodes, nil
}

// UnitUUIDs lists the units the agent hands out on node, as agent.NewDevices
// does (inventory.Node.Units).
func UnitUUIDs(node inventory.Node) []string { return node.UnitUUIDs() }

// Generate locates node's units through lib and writes the spec; it
// returns the spec's path.
func Generate(lib nvml.Interface, node inventory.Node, o Options) (string, error) {
	w, err := NewWriter(lib, node, o)
	if err != nil {
		return "", err
	}
	return w.Path(), nil
}

// Writer keeps the node's spec: its units, and MIG instances created for
// containers after the spec was first written (dynamic MIG), which are
// added before a container is handed one and removed once destroyed. Safe
// for concurrent use.
type Writer struct {
	lib    nvml.Interface
	o      Options
	common ContainerEdits

	mu    sync.Mutex
	base  []Unit // the node's units
	extra map[string]Unit
	path  string
}

// NewWriter locates node's units through lib and writes the spec.
func NewWriter(lib nvml.Interface, node inventory.Node, o Options) (*Writer, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.HostRoot == "" {
		o.HostRoot = "/"
	}
	var common ContainerEdits
	if o.BaseSpec != "" {
		var err error
		if common, err = ReadBaseEdits(o.BaseSpec); err != nil {
			return nil, err
		}
	}
	nodes, err := ControlNodes(o.HostRoot)
	if err != nil {
		return nil, err
	}
	units, err := Locate(lib, UnitUUIDs(node))
	if err != nil {
		return nil, err
	}
	w := &Writer{lib: lib, o: o, common: common.WithNodes(nodes...), base: units, extra: map[string]Unit{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeLocked(w.extra); err != nil {
		return nil, err
	}
	return w, nil
}

// Path is the spec file.
func (w *Writer) Path() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path
}

// Add locates the MIG instances (or GPUs) uuids through NVML and writes
// the spec with them; a UUID already in the spec is left as it is. On an
// error the spec is unchanged.
func (w *Writer) Add(uuids ...string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var missing []string
	for _, u := range uuids {
		if _, ok := w.extra[u]; !ok && !w.inBaseLocked(u) && !slices.Contains(missing, u) {
			missing = append(missing, u)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	units, err := Locate(w.lib, missing)
	if err != nil {
		return err
	}
	next := maps.Clone(w.extra)
	for _, u := range units {
		next[u.UUID] = u
	}
	return w.writeLocked(next)
}

// Remove drops added units (destroyed MIG instances) from the spec; the
// node's own units stay.
func (w *Writer) Remove(uuids ...string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := maps.Clone(w.extra)
	for _, u := range uuids {
		delete(next, u)
	}
	if len(next) == len(w.extra) {
		return nil
	}
	return w.writeLocked(next)
}

func (w *Writer) inBaseLocked(uuid string) bool {
	for _, u := range w.base {
		if u.UUID == uuid {
			return true
		}
	}
	return false
}

// MIGMinorsFor reads the driver's list of MIG capabilities (MIGMinorsFile
// under hostRoot) when one of units is a MIG instance, which Build needs
// for its capability nodes; nil when none is.
func MIGMinorsFor(hostRoot string, units []Unit) (MIGMinors, error) {
	i := slices.IndexFunc(units, func(u Unit) bool { return u.MIG != nil })
	if i < 0 {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(hostRoot, MIGMinorsFile))
	if err != nil {
		return nil, fmt.Errorf("MIG instance %s needs the driver's list of MIG capabilities: %w", units[i].UUID, err)
	}
	defer f.Close()
	return ParseMIGMinors(f)
}

// writeLocked builds and writes the spec of the node's units and extra,
// and makes extra the writer's on success.
func (w *Writer) writeLocked(extra map[string]Unit) error {
	units := slices.Clone(w.base)
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		units = append(units, extra[k])
	}
	minors, err := MIGMinorsFor(w.o.HostRoot, units)
	if err != nil {
		return err
	}
	spec, err := Build(units, minors, w.common)
	if err != nil {
		return err
	}
	path, err := Write(w.o.Dir, spec)
	if err != nil {
		return err
	}
	w.path, w.extra = path, extra
	return nil
}

// Locate finds through NVML each unit's GPU minor number and, for a MIG
// device, its GPU and compute instance IDs.
func Locate(lib nvml.Interface, uuids []string) ([]Unit, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("locate GPUs for the CDI spec: nvmlInit: %w", ret)
	}
	defer lib.Shutdown()
	out := make([]Unit, 0, len(uuids))
	for _, uuid := range uuids {
		u, err := locate(lib, uuid)
		if err != nil {
			return nil, fmt.Errorf("locate %s for the CDI spec: %w", uuid, err)
		}
		out = append(out, u)
	}
	return out, nil
}

func locate(lib nvml.Interface, uuid string) (Unit, error) {
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return Unit{}, fmt.Errorf("DeviceGetHandleByUUID: %w", ret)
	}
	isMIG, ret := dev.IsMigDeviceHandle()
	if ret != nvml.SUCCESS {
		return Unit{}, fmt.Errorf("IsMigDeviceHandle: %w", ret)
	}
	u := Unit{UUID: uuid}
	gpu := dev
	if isMIG {
		if gpu, ret = dev.GetDeviceHandleFromMigDeviceHandle(); ret != nvml.SUCCESS {
			return Unit{}, fmt.Errorf("GetDeviceHandleFromMigDeviceHandle: %w", ret)
		}
		gi, ret := dev.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			return Unit{}, fmt.Errorf("GetGpuInstanceId: %w", ret)
		}
		ci, ret := dev.GetComputeInstanceId()
		if ret != nvml.SUCCESS {
			return Unit{}, fmt.Errorf("GetComputeInstanceId: %w", ret)
		}
		u.MIG = &MIGInstance{GI: gi, CI: ci}
	}
	minor, ret := gpu.GetMinorNumber()
	if ret != nvml.SUCCESS {
		return Unit{}, fmt.Errorf("GetMinorNumber: %w", ret)
	}
	u.GPUMinor = minor
	return u, nil
}
