package handoff

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/shareenv"
)

// Paths inside every container the agent configures.
const (
	// ContainerStateDir holds the container's enforcement state: the
	// interception library's accounting file and the arbiter's grant region.
	ContainerStateDir = "/run/tessera"
	// ContainerGrantRegion is the arbiter's compute grant region for the container.
	ContainerGrantRegion = ContainerStateDir + "/grant"
	// ContainerArbiterDir holds the node arbiter's socket.
	ContainerArbiterDir = "/run/tessera-arbiter"
	// ContainerArbiterSocket is the node arbiter's socket.
	ContainerArbiterSocket = ContainerArbiterDir + "/arbiter.sock"
	// ContainerInterceptLibrary is where the interception library is mounted.
	ContainerInterceptLibrary = "/usr/local/lib/tessera/libtessera-intercept.so"
)

// AllocationAnnotation is the runtime annotation naming the allocation key.
const AllocationAnnotation = "tessera.io/allocation"

// Paths says where the node keeps what containers need.
type Paths struct {
	// HostStateRoot holds one folder per allocation key, mounted read-write
	// at ContainerStateDir (tmpfs, e.g. /run/tessera/containers). Required.
	HostStateRoot string
	// HostArbiterDir is the folder of the node arbiter's socket; empty when
	// no arbiter runs (then no grant region is named).
	HostArbiterDir string
	// HostInterceptLibrary is the interception library on the host; empty
	// leaves containers without LD_PRELOAD (no memory or compute enforcement).
	HostInterceptLibrary string
	// CDI hands GPUs to the runtime as CDI device names (CDIKind=UUID)
	// instead of through NVIDIA_VISIBLE_DEVICES.
	CDI bool
	// CDIKind is the CDI vendor/class of GPUs, "nvidia.com/gpu" by default.
	CDIKind string
	// CDISpecDir, when set, makes the agent write its own CDI spec (kind
	// tessera.io/gpu, package agent/cdi) for the node's GPUs and MIG
	// instances into this folder at start, and hand containers those names
	// (it implies CDI and sets CDIKind).
	CDISpecDir string
	// CDIBaseSpec, optional with CDISpecDir, is a CDI spec file (from
	// nvidia-ctk cdi generate) whose driver libraries and hooks are copied.
	CDIBaseSpec string
	// ComputeFail is TESSERA_COMPUTE_FAIL: "open" or "closed" ("" = library default).
	ComputeFail string
	// Oversubscribe sets TESSERA_OVERSUBSCRIBE=1.
	Oversubscribe bool
}

// Validate checks the paths; errors name the field.
func (p Paths) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"host state root", p.HostStateRoot}, {"arbiter dir", p.HostArbiterDir}, {"intercept library", p.HostInterceptLibrary},
		{"CDI spec dir", p.CDISpecDir}, {"CDI base spec", p.CDIBaseSpec},
	} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			return fmt.Errorf("%s: must be an absolute path, got %q", f.name, f.v)
		}
	}
	if p.HostStateRoot == "" {
		return fmt.Errorf("host state root: must be set")
	}
	if p.CDIBaseSpec != "" && p.CDISpecDir == "" {
		return fmt.Errorf("CDI base spec: needs a CDI spec dir")
	}
	if p.ComputeFail != "" && p.ComputeFail != "open" && p.ComputeFail != "closed" {
		return fmt.Errorf("compute fail: must be open or closed, got %q", p.ComputeFail)
	}
	return nil
}

// HostStateDir is the host folder of one allocation.
func (p Paths) HostStateDir(key string) string { return filepath.Join(p.HostStateRoot, key) }

// Mount is a bind mount into the container.
type Mount struct {
	HostPath, ContainerPath string
	ReadOnly                bool
}

// Handoff is what kubelet passes to the runtime for one container.
type Handoff struct {
	Env         map[string]string
	Mounts      []Mount
	CDIDevices  []string
	Annotations map[string]string
}

// Build returns the handoff of a container with allocation key and shares.
// Devices are listed in GPU index (PCI bus) order and CUDA_DEVICE_ORDER is
// PCI_BUS_ID, so inside the container CUDA ordinal i, NVML index i and item
// i of every per-device list (TESSERA_MEMORY_LIMIT...) are the same GPU, as
// docs/enforcement.md requires.
func Build(p Paths, key string, gpus []binding.Share) Handoff {
	settings := shareenv.Settings{ContainerID: key, ShmDir: ContainerStateDir, ComputeFail: p.ComputeFail, Oversubscribe: p.Oversubscribe}
	if p.HostArbiterDir != "" {
		settings.ArbiterRegion, settings.ArbiterSocket = ContainerGrantRegion, ContainerArbiterSocket
	}
	h := Handoff{
		Env:         shareenv.Vars(gpus, settings),
		Mounts:      []Mount{{HostPath: p.HostStateDir(key), ContainerPath: ContainerStateDir}},
		Annotations: map[string]string{AllocationAnnotation: key},
	}
	visible := h.Env[shareenv.CUDAVisibleDevices]
	if p.CDI {
		kind := p.CDIKind
		if kind == "" {
			kind = "nvidia.com/gpu"
		}
		for _, u := range strings.Split(visible, ",") {
			if u != "" {
				h.CDIDevices = append(h.CDIDevices, kind+"="+u)
			}
		}
		// CUDA base images set NVIDIA_VISIBLE_DEVICES=all; with CDI the
		// devices come from the CDI names, so the legacy hook must add none.
		h.Env["NVIDIA_VISIBLE_DEVICES"] = "void"
	} else {
		h.Env["NVIDIA_VISIBLE_DEVICES"] = visible
	}
	if p.HostArbiterDir != "" {
		h.Mounts = append(h.Mounts, Mount{HostPath: p.HostArbiterDir, ContainerPath: ContainerArbiterDir, ReadOnly: true})
	}
	if p.HostInterceptLibrary != "" {
		h.Env["LD_PRELOAD"] = ContainerInterceptLibrary
		h.Mounts = append(h.Mounts, Mount{HostPath: p.HostInterceptLibrary, ContainerPath: ContainerInterceptLibrary, ReadOnly: true})
	}
	return h
}

// MPS client variables the agent passes on (arbiter/mps.ClientEnv).
const (
	EnvMPSPipeDir          = "CUDA_MPS_PIPE_DIRECTORY"
	EnvMPSThreadPercentage = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	EnvMPSPinnedMemLimit   = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
)

// AddMPS makes h an MPS client's handoff: it adds env, the variables the
// node arbiter gives the container in MPS mode (Arbiter.ClientEnv), and
// mounts the GPU's MPS pipe folder, CUDA_MPS_PIPE_DIRECTORY, read-write at
// the same path, where the CUDA driver in the container reaches the
// control daemon. The pipe folder must be an absolute path; env may set
// only the three CUDA_MPS_* variables above.
func (h *Handoff) AddMPS(env map[string]string) error {
	pipe := env[EnvMPSPipeDir]
	if !filepath.IsAbs(pipe) {
		return fmt.Errorf("MPS client env: %s: must be an absolute path, got %q", EnvMPSPipeDir, pipe)
	}
	for k := range env {
		if k != EnvMPSPipeDir && k != EnvMPSThreadPercentage && k != EnvMPSPinnedMemLimit {
			return fmt.Errorf("MPS client env: %s: not an MPS client variable (want %s, %s or %s)", k, EnvMPSPipeDir, EnvMPSThreadPercentage, EnvMPSPinnedMemLimit)
		}
	}
	for k, v := range env {
		h.Env[k] = v
	}
	h.Mounts = append(h.Mounts, Mount{HostPath: pipe, ContainerPath: pipe})
	return nil
}
