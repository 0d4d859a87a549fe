package cdi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/internal/atomicfile"
)

// Spec identity.
const (
	// Kind is the CDI vendor/class of the agent's devices; a container's
	// devices are named Kind=<UUID>.
	Kind = "tessera.io/gpu"
	// Version is the CDI spec version written (0.7.0 when the copied base
	// edits use additionalGids or intelRdt, which need it).
	Version = "0.6.0"
	// DefaultDir is where runtimes look for dynamic (generated) specs.
	DefaultDir = "/var/run/cdi"
	// FileName is the spec's file in the spec folder.
	FileName = "tessera.io-gpu.json"
)

// Spec is a CDI spec (https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md).
type Spec struct {
	Version        string         `json:"cdiVersion"`
	Kind           string         `json:"kind"`
	Devices        []Device       `json:"devices"`
	ContainerEdits ContainerEdits `json:"containerEdits,omitempty"`
}

// Device is one named device and what injecting it does.
type Device struct {
	Name           string         `json:"name"`
	ContainerEdits ContainerEdits `json:"containerEdits"`
}

// ContainerEdits are changes to a container's OCI spec.
type ContainerEdits struct {
	Env            []string        `json:"env,omitempty"`
	DeviceNodes    []DeviceNode    `json:"deviceNodes,omitempty"`
	Hooks          []Hook          `json:"hooks,omitempty"`
	Mounts         []Mount         `json:"mounts,omitempty"`
	IntelRdt       json.RawMessage `json:"intelRdt,omitempty"`
	AdditionalGIDs []uint32        `json:"additionalGids,omitempty"`
}

// DeviceNode is a device node to create in the container; the runtime
// reads the type and numbers from the host's node when they are omitted.
type DeviceNode struct {
	Path        string  `json:"path"`
	HostPath    string  `json:"hostPath,omitempty"`
	Type        string  `json:"type,omitempty"`
	Major       int64   `json:"major,omitempty"`
	Minor       int64   `json:"minor,omitempty"`
	FileMode    *uint32 `json:"fileMode,omitempty"`
	Permissions string  `json:"permissions,omitempty"`
	UID         *uint32 `json:"uid,omitempty"`
	GID         *uint32 `json:"gid,omitempty"`
}

// Hook is an OCI hook.
type Hook struct {
	HookName string   `json:"hookName"`
	Path     string   `json:"path"`
	Args     []string `json:"args,omitempty"`
	Env      []string `json:"env,omitempty"`
	Timeout  *int     `json:"timeout,omitempty"`
}

// Mount is a mount into the container.
type Mount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Type          string   `json:"type,omitempty"`
	Options       []string `json:"options,omitempty"`
}

// Unit is one device the agent hands out and where the host exposes it.
type Unit struct {
	// UUID is the GPU's or MIG instance's UUID; it names the CDI device.
	UUID string
	// GPUMinor is the minor number of the (parent) GPU: /dev/nvidia<GPUMinor>.
	GPUMinor int
	// MIG is set for a MIG instance: its GPU and compute instance IDs.
	MIG *MIGInstance
}

// MIGInstance identifies a MIG device on its GPU.
type MIGInstance struct{ GI, CI int }

// MIGMinors maps a capability ("gpu0/gi1/access", "gpu0/gi1/ci0/access")
// to the minor number of its /dev/nvidia-caps/nvidia-cap<N> node, as the
// driver lists them in /proc/driver/nvidia-caps/mig-minors.
type MIGMinors map[string]int

// MIGMinorsFile is where the driver lists the MIG capability minors.
const MIGMinorsFile = "/proc/driver/nvidia-caps/mig-minors"

// ParseMIGMinors reads the driver's mig-minors list ("gpu0/gi1/access 12"
// per line).
func ParseMIGMinors(r io.Reader) (MIGMinors, error) {
	out := MIGMinors{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("mig-minors line %d: want \"<capability> <minor>\", got %q", n, line)
		}
		minor, err := strconv.Atoi(f[1])
		if err != nil || minor < 0 {
			return nil, fmt.Errorf("mig-minors line %d: minor must be a whole number >= 0, got %q", n, f[1])
		}
		out[f[0]] = minor
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mig-minors: %w", err)
	}
	return out, nil
}

// ValidateName checks a CDI device name: letters, digits, '_', '-', '.'
// and ':' only.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("CDI device name: must not be empty")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:", c)) {
			return fmt.Errorf("CDI device name %q: only letters, digits, '_', '-', '.' and ':' are allowed, got %q", name, c)
		}
	}
	return nil
}

// Build returns the spec of units: one device per unit named by its UUID
// with its device nodes, and common edits (the control and UVM nodes, a
// base spec's libraries and hooks) applied once to any container that gets
// one of them. A MIG unit needs its capabilities in minors.
func Build(units []Unit, minors MIGMinors, common ContainerEdits) (Spec, error) {
	s := Spec{Version: Version, Kind: Kind, ContainerEdits: common}
	seen := map[string]bool{}
	for _, u := range units {
		if err := ValidateName(u.UUID); err != nil {
			return Spec{}, fmt.Errorf("unit %s: %w", u.UUID, err)
		}
		if seen[u.UUID] {
			return Spec{}, fmt.Errorf("unit %s: listed twice", u.UUID)
		}
		seen[u.UUID] = true
		if u.GPUMinor < 0 {
			return Spec{}, fmt.Errorf("unit %s: GPU minor number must be >= 0, got %d", u.UUID, u.GPUMinor)
		}
		nodes := []DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", u.GPUMinor)}}
		if u.MIG != nil {
			gi := fmt.Sprintf("gpu%d/gi%d/access", u.GPUMinor, u.MIG.GI)
			ci := fmt.Sprintf("gpu%d/gi%d/ci%d/access", u.GPUMinor, u.MIG.GI, u.MIG.CI)
			for _, c := range []string{gi, ci} {
				m, ok := minors[c]
				if !ok {
					return Spec{}, fmt.Errorf("unit %s: the driver lists no MIG capability %s in %s", u.UUID, c, MIGMinorsFile)
				}
				nodes = append(nodes, DeviceNode{Path: fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", m)})
			}
		}
		s.Devices = append(s.Devices, Device{Name: u.UUID, ContainerEdits: ContainerEdits{DeviceNodes: nodes}})
	}
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].Name < s.Devices[j].Name })
	if len(common.AdditionalGIDs) > 0 || len(common.IntelRdt) > 0 {
		s.Version = "0.7.0"
	}
	return s, nil
}

// QualifiedName is the CDI name a container is handed for a unit.
func QualifiedName(uuid string) string { return Kind + "=" + uuid }

// ReadBaseEdits returns the top-level container edits (driver libraries,
// hooks, control nodes) of another CDI spec file, JSON or YAML, such as
// the one nvidia-ctk cdi generate writes.
func ReadBaseEdits(path string) (ContainerEdits, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ContainerEdits{}, fmt.Errorf("read base CDI spec: %w", err)
	}
	var base struct {
		Kind           string          `json:"kind"`
		ContainerEdits json.RawMessage `json:"containerEdits"`
	}
	if err := yaml.Unmarshal(data, &base); err != nil {
		return ContainerEdits{}, fmt.Errorf("base CDI spec %s: %w", path, err)
	}
	if base.Kind == "" {
		return ContainerEdits{}, fmt.Errorf("base CDI spec %s: kind must be set; is it a CDI spec?", path)
	}
	if base.Kind == Kind {
		return ContainerEdits{}, fmt.Errorf("base CDI spec %s: is Tessera's own spec (kind %s); name the driver's spec (nvidia-ctk cdi generate)", path, Kind)
	}
	var edits ContainerEdits
	if len(base.ContainerEdits) == 0 {
		return edits, nil
	}
	// Strict, so that an edit this package does not know is an error
	// rather than silently dropped from the copy.
	dec := json.NewDecoder(bytes.NewReader(base.ContainerEdits))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&edits); err != nil {
		return ContainerEdits{}, fmt.Errorf("base CDI spec %s: containerEdits: %w", path, err)
	}
	return edits, nil
}

// WithNodes adds device nodes to e (once each, by container path).
func (e ContainerEdits) WithNodes(paths ...string) ContainerEdits {
	have := map[string]bool{}
	for _, n := range e.DeviceNodes {
		have[n.Path] = true
	}
	e.DeviceNodes = append([]DeviceNode(nil), e.DeviceNodes...)
	for _, p := range paths {
		if !have[p] {
			e.DeviceNodes = append(e.DeviceNodes, DeviceNode{Path: p})
			have[p] = true
		}
	}
	return e
}

// Write stores s as dir/FileName atomically (a temporary file the runtime
// ignores, then a rename) and returns the path.
func Write(dir string, s Spec) (string, error) { return WriteFile(dir, FileName, s) }

// WriteFile stores s as dir/name atomically, as Write does; other writers
// of specs (the DRA kubelet plugin's per-claim specs) name their files.
func WriteFile(dir, name string, s Spec) (string, error) {
	if name == "" || name != filepath.Base(name) {
		return "", fmt.Errorf("CDI spec file name: must be a plain file name, got %q", name)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode CDI spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create CDI spec folder: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := atomicfile.Write(path, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("CDI spec: %w", err)
	}
	return path, nil
}
