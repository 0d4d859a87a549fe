package queueing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/tessera-gpu/tessera/quantity"
)

// Spec is a queue as people write it: the fields of the cluster's Queue
// resource (spec.parent, spec.priority...), here with its name, as one
// entry of the host daemon's configuration file. Amounts are quantities.
type Spec struct {
	Name       string  `json:"name"`
	Parent     string  `json:"parent,omitempty"`
	Priority   int64   `json:"priority,omitempty"`
	Weight     int64   `json:"weight,omitempty"`
	Guaranteed Amounts `json:"guaranteed,omitempty"`
	Limit      Amounts `json:"limit,omitempty"`
	// IdleReclaimAfter is a duration ("2h", "90m"; "" or "0": off).
	IdleReclaimAfter string `json:"idleReclaimAfter,omitempty"`
}

// Amounts are quantities of each resource fair share measures.
type Amounts struct {
	GPU       Amount `json:"gpu,omitempty"`       // GPUs: 4, 0.5, 500m
	GPUMemory Amount `json:"gpuMemory,omitempty"` // 320Gi
	CPU       Amount `json:"cpu,omitempty"`       // cores: 64, 0.5
	Memory    Amount `json:"memory,omitempty"`    // 512Gi
}

// Amount is a quantity written as a string ("320Gi", "0.5") or a number (4).
type Amount string

// UnmarshalJSON accepts a string or a number.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Amount(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("must be a quantity such as 4, 0.5 or 320Gi, got %s", b)
	}
	*a = Amount(n.String())
	return nil
}

// Queue converts s. Errors name the field under path (e.g. "queues[2]")
// and the allowed form or range; the tree-wide checks (unique names,
// parents, cycles) are NewTree's.
func (s Spec) Queue(path string) (Queue, error) {
	q := Queue{Name: s.Name, Parent: s.Parent}
	if !validName(s.Name) {
		return Queue{}, fmt.Errorf("%s.name: must be a lowercase DNS label (a-z, 0-9, '-', '.', at most 63), got %q", path, s.Name)
	}
	if s.Priority < math.MinInt32 || s.Priority > math.MaxInt32 {
		return Queue{}, fmt.Errorf("%s.priority: must be in [%d, %d], got %d", path, math.MinInt32, math.MaxInt32, s.Priority)
	}
	if s.Weight < 0 || s.Weight > math.MaxInt32 {
		return Queue{}, fmt.Errorf("%s.weight: must be in [0, %d] (0 means 1), got %d", path, math.MaxInt32, s.Weight)
	}
	q.Priority, q.Weight = int32(s.Priority), int32(s.Weight)
	var err error
	if q.Guaranteed, err = s.Guaranteed.resources(path + ".guaranteed"); err != nil {
		return Queue{}, err
	}
	if q.Limit, err = s.Limit.resources(path + ".limit"); err != nil {
		return Queue{}, err
	}
	if !q.Guaranteed.Fits(q.Limit) {
		return Queue{}, fmt.Errorf("%s.guaranteed: must be within %s.limit", path, path)
	}
	if s.IdleReclaimAfter != "" {
		d, err := time.ParseDuration(s.IdleReclaimAfter)
		if err != nil {
			return Queue{}, fmt.Errorf("%s.idleReclaimAfter: must be a duration such as 2h or 90m, 0 (off) or in [30m, 168h], got %q", path, s.IdleReclaimAfter)
		}
		if err := checkIdleReclaimAfter(path+".idleReclaimAfter", d); err != nil {
			return Queue{}, err
		}
		q.IdleReclaimAfter = d
	}
	return q, nil
}

func (a Amounts) resources(path string) (Resources, error) {
	var r Resources
	for _, f := range []struct {
		key, allowed string
		v            Amount
		parse        func(string) (int64, error)
		dst          *int64
	}{
		{"gpu", "a number of GPUs such as 4 or 0.5", a.GPU, quantity.ParseShare, &r.GPUMilli},
		{"gpuMemory", "a size such as 320Gi", a.GPUMemory, quantity.ParseMiB, &r.GPUMemoryMiB},
		{"cpu", "a number of cores such as 64 or 0.5", a.CPU, quantity.ParseShare, &r.CPUMilli},
		{"memory", "a size such as 512Gi", a.Memory, quantity.ParseMiB, &r.MemoryMiB},
	} {
		if f.v == "" {
			continue
		}
		n, err := f.parse(string(f.v))
		if err != nil || n < 0 {
			return Resources{}, fmt.Errorf("%s.%s: must be %s, got %q", path, f.key, f.allowed, string(f.v))
		}
		*f.dst = n
	}
	return r, nil
}

// FromSpecs converts and validates a list of specs (paths "queues[i]") into
// a tree; it returns the queues too, in the given order.
func FromSpecs(specs []Spec) ([]Queue, *Tree, error) {
	qs := make([]Queue, 0, len(specs))
	for i, s := range specs {
		q, err := s.Queue(fmt.Sprintf("queues[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		qs = append(qs, q)
	}
	t, err := NewTree(qs)
	if err != nil {
		return nil, nil, err
	}
	return qs, t, nil
}
