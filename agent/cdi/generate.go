package cdi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// UnitUUIDs lists the units the agent hands out on node, as agent.NewDevices
// does (inventory.Node.Units).
func UnitUUIDs(node inventory.Node) []string { return node.UnitUUIDs() }

// Generate locates node's units through lib and writes the spec; it
// returns the spec's path.
func Generate(lib nvml.Interface, node inventory.Node, o Options) (string, error) {
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
			return "", err
		}
	}
	var nodes []string
	for i, p := range controlNodes() {
		_, err := os.Stat(filepath.Join(o.HostRoot, p))
		switch {
		case err == nil:
			nodes = append(nodes, p)
		case i == 0 || !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("driver control node: %w", err)
		}
	}
	units, err := Locate(lib, UnitUUIDs(node))
	if err != nil {
		return "", err
	}
	var minors MIGMinors
	for _, u := range units {
		if u.MIG != nil {
			f, err := os.Open(filepath.Join(o.HostRoot, MIGMinorsFile))
			if err != nil {
				return "", fmt.Errorf("MIG instance %s needs the driver's list of MIG capabilities: %w", u.UUID, err)
			}
			minors, err = ParseMIGMinors(f)
			f.Close()
			if err != nil {
				return "", err
			}
			break
		}
	}
	spec, err := Build(units, minors, common.WithNodes(nodes...))
	if err != nil {
		return "", err
	}
	return Write(o.Dir, spec)
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
