package binding

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/quantity"
)

// Version is the encoding version this package writes and reads.
const Version = 1

// AnnotationKey is the Kubernetes pod annotation that carries an encoded
// Assignment. The scheduler writes it; the node agent reads it.
const AnnotationKey = "tessera.io/assignment"

// Assignment is the GPUs granted to one workload (a pod or a local job).
type Assignment struct {
	// Version of the encoding; Decode rejects versions it does not know.
	Version int `json:"v"`
	// Node is the node the workload was placed on.
	Node string `json:"node"`
	// Containers lists every container that got GPUs; containers absent
	// from the list get none and must be left untouched.
	Containers []Container `json:"containers"`
}

// Container is one container's share of GPUs.
type Container struct {
	Name string  `json:"name"`
	GPUs []Share `json:"gpus"`
}

// Share is what a container may use of one GPU.
type Share struct {
	// UUID identifies the GPU (or MIG instance) on the node.
	UUID string `json:"uuid"`
	// Index is the GPU's index on the node, for humans and metrics.
	Index int `json:"index"`
	// ComputeMilli is the guaranteed compute in thousandths, [1, 1000].
	ComputeMilli int64 `json:"compute"`
	// ComputeLimitMilli is the burst limit, [ComputeMilli, 1000].
	ComputeLimitMilli int64 `json:"computeLimit"`
	// MemoryMiB is the guaranteed memory, > 0.
	MemoryMiB int64 `json:"memoryMiB"`
	// MemoryLimitMiB is the memory cap, >= MemoryMiB.
	MemoryLimitMiB int64 `json:"memoryLimitMiB"`
	// MIGProfile is set when the share is a whole MIG instance.
	MIGProfile string `json:"migProfile,omitempty"`
	// MIG says where the MIG instance lies (set by the engine's MIG
	// placement; absent in records that predate it). For an existing
	// instance UUID is the instance's; for one the node must create,
	// UUID is the parent GPU's until the node has created it.
	MIG *MIGInstance `json:"mig,omitempty"`
}

// MIGInstance is the MIG instance of a share.
type MIGInstance struct {
	// GPU is the parent GPU's UUID.
	GPU string `json:"gpu"`
	// Start is the instance's first memory slice (its placement start);
	// -1 when the node reported an existing instance without it.
	Start int `json:"start"`
	// Create asks the node to create the instance (GPU instance and
	// compute instance of MIGProfile at Start) before the workload starts
	// and to destroy it when the workload ends.
	Create bool `json:"create,omitempty"`
}

// Encode returns the assignment's JSON form after validating it.
func Encode(a Assignment) (string, error) {
	if a.Version == 0 {
		a.Version = Version
	}
	if err := a.Validate(); err != nil {
		return "", err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode assignment: %w", err)
	}
	return string(data), nil
}

// Decode parses and validates an encoded assignment. Unknown fields are
// errors, so a malformed record is never half-read.
func Decode(s string) (Assignment, error) {
	var a Assignment
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Assignment{}, fmt.Errorf("decode assignment: %w", err)
	}
	if dec.More() {
		return Assignment{}, fmt.Errorf("decode assignment: trailing data after the JSON object")
	}
	if err := a.Validate(); err != nil {
		return Assignment{}, err
	}
	return a, nil
}

// Validate checks every field; errors name the field path and allowed range.
func (a Assignment) Validate() error {
	if a.Version != Version {
		return fmt.Errorf("assignment.v: must be %d, got %d", Version, a.Version)
	}
	if a.Node == "" {
		return fmt.Errorf("assignment.node: must not be empty")
	}
	if len(a.Containers) == 0 {
		return fmt.Errorf("assignment.containers: must list at least one container")
	}
	names := map[string]bool{}
	for i, c := range a.Containers {
		path := fmt.Sprintf("assignment.containers[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("%s.name: must not be empty", path)
		}
		if names[c.Name] {
			return fmt.Errorf("%s.name: %q is listed twice", path, c.Name)
		}
		names[c.Name] = true
		if len(c.GPUs) == 0 {
			return fmt.Errorf("%s.gpus: must list at least one GPU", path)
		}
		uuids := map[string]bool{}
		for j, g := range c.GPUs {
			if err := g.validate(fmt.Sprintf("%s.gpus[%d]", path, j)); err != nil {
				return err
			}
			if uuids[g.UUID] {
				return fmt.Errorf("%s.gpus[%d].uuid: %q is listed twice", path, j, g.UUID)
			}
			uuids[g.UUID] = true
		}
	}
	return nil
}

func (g Share) validate(path string) error {
	switch {
	case g.UUID == "":
		return fmt.Errorf("%s.uuid: must not be empty", path)
	case g.Index < 0:
		return fmt.Errorf("%s.index: must be >= 0, got %d", path, g.Index)
	case g.ComputeMilli < 1 || g.ComputeMilli > quantity.MilliPerUnit:
		return fmt.Errorf("%s.compute: must be in [1, 1000], got %d", path, g.ComputeMilli)
	case g.ComputeLimitMilli < g.ComputeMilli || g.ComputeLimitMilli > quantity.MilliPerUnit:
		return fmt.Errorf("%s.computeLimit: must be in [%d, 1000], got %d", path, g.ComputeMilli, g.ComputeLimitMilli)
	case g.MemoryMiB < 1:
		return fmt.Errorf("%s.memoryMiB: must be >= 1, got %d", path, g.MemoryMiB)
	case g.MemoryLimitMiB < g.MemoryMiB:
		return fmt.Errorf("%s.memoryLimitMiB: must be >= memoryMiB (%d), got %d", path, g.MemoryMiB, g.MemoryLimitMiB)
	}
	if m := g.MIG; m != nil {
		switch {
		case g.MIGProfile == "":
			return fmt.Errorf("%s.migProfile: must be set when mig is set", path)
		case m.GPU == "":
			return fmt.Errorf("%s.mig.gpu: must not be empty", path)
		case m.Start < -1:
			return fmt.Errorf("%s.mig.start: must be >= 0, or -1 when unknown, got %d", path, m.Start)
		case m.Create && m.Start < 0:
			return fmt.Errorf("%s.mig.start: must be >= 0 when create is true, got %d", path, m.Start)
		case m.Create && g.UUID != m.GPU:
			return fmt.Errorf("%s.uuid: must be the parent GPU's UUID %q while the instance is to be created, got %q", path, m.GPU, g.UUID)
		case !m.Create && g.UUID == m.GPU:
			return fmt.Errorf("%s.uuid: must be the MIG instance's UUID, not the parent GPU's %q", path, m.GPU)
		}
	}
	return nil
}

// Container returns the named container's share list.
func (a Assignment) Container(name string) (Container, bool) {
	for _, c := range a.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}
