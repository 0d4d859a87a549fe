package nodeuse

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/gpuuse"
)

// Status is a GPUUse's status: one node's use records.
type Status struct {
	// Source is the node's discovery backend (nvml, or sim).
	Source string `json:"source"`
	// At is when the agent published the records.
	At   time.Time `json:"at"`
	Rule Rule      `json:"rule"`
	// GPUs are every GPU of the node, each with its shares; a GPU no
	// workload holds has none and says so in its use.
	GPUs []gpuuse.GPU `json:"gpus"`
}

// Rule is how the node's figures are made.
type Rule struct {
	WindowSeconds    float64 `json:"windowSeconds"`
	IdleBelowMilli   int64   `json:"idleBelowMilli"`
	IdleAfterSeconds float64 `json:"idleAfterSeconds"`
	// Metered: a meter reads use on the node (NVML, or the simulated
	// meter on simulated GPUs).
	Metered bool `json:"metered"`
}

// StatusContent returns st as the unstructured content of a status.
func StatusContent(st Status) (map[string]any, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode GPUUse status: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("encode GPUUse status: %w", err)
	}
	return out, nil
}

// Object returns the GPUUse object of node with status st.
func Object(node string, st Status) (*unstructured.Unstructured, error) {
	content, err := StatusContent(st)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Resource().GroupVersion().String(),
		"kind":       "GPUUse",
		"metadata":   map[string]any{"name": node},
		"spec":       map[string]any{"nodeName": node},
		"status":     content,
	}}, nil
}

// FromObject reads a GPUUse object's status back. A use source outside
// measured, simulated and none is an error naming the field: a view must
// never show a figure under a label it does not know.
func FromObject(u *unstructured.Unstructured) (Status, error) {
	raw, ok := u.Object["status"]
	if !ok {
		return Status{}, fmt.Errorf("GPUUse %s: status is missing", u.GetName())
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return Status{}, fmt.Errorf("GPUUse %s: status: %w", u.GetName(), err)
	}
	var st Status
	if err := json.Unmarshal(data, &st); err != nil {
		return Status{}, fmt.Errorf("GPUUse %s: status: %w", u.GetName(), err)
	}
	for i, g := range st.GPUs {
		if err := checkSource(g.Use.Source); err != nil {
			return Status{}, fmt.Errorf("GPUUse %s: status.gpus[%d].use.source: %w", u.GetName(), i, err)
		}
		for j, s := range g.Shares {
			if err := checkSource(s.Use.Source); err != nil {
				return Status{}, fmt.Errorf("GPUUse %s: status.gpus[%d].shares[%d].use.source: %w", u.GetName(), i, j, err)
			}
		}
	}
	return st, nil
}

func checkSource(s gpuuse.Source) error {
	switch s {
	case gpuuse.Measured, gpuuse.Simulated, gpuuse.None:
		return nil
	}
	return fmt.Errorf("must be one of %s, %s, %s, got %q", gpuuse.Measured, gpuuse.Simulated, gpuuse.None, s)
}
