package request

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/quantity"
)

// MaxCount is the largest number of GPUs one request may ask for: the most
// GPUs a single node in the catalog's systems carries.
const MaxCount = 16

// Whole is a whole GPU in thousandths.
const Whole = quantity.MilliPerUnit

// GPU is a workload's GPU request. The zero value asks for nothing.
type GPU struct {
	// Count is the number of GPUs, in [1, MaxCount].
	Count int `json:"count"`
	// ComputeMilli is the guaranteed compute share of each GPU in
	// thousandths, in [1, 1000]; 1000 is a whole GPU. 0 means "in proportion
	// to the memory": MemoryMiB over the chosen GPU's memory (a memory-only
	// share, as HAMi's gpumem and KAI's gpu-memory ask); MemoryMiB must then be set.
	ComputeMilli int64 `json:"computeMilli"`
	// ComputeLimitMilli is the burst limit of each GPU, in
	// [ComputeMilli, 1000]: the share the node may grant when the GPU is idle.
	// With a proportional ComputeMilli, 0 means equal to the resolved share.
	ComputeLimitMilli int64 `json:"computeLimitMilli"`
	// MemoryMiB is the guaranteed memory on each GPU. 0 means "in proportion
	// to the compute share": ComputeMilli/1000 of the chosen GPU's memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// MemoryLimitMiB is the memory the workload may use on each GPU, at
	// least MemoryMiB; 0 means equal to the (resolved) MemoryMiB.
	MemoryLimitMiB int64 `json:"memoryLimitMiB"`
	// MemoryShareMilli is the guaranteed memory of each GPU as a share of
	// the chosen GPU's memory, in thousandths (250: a quarter), independent
	// of ComputeMilli (as HAMi's gpumem-percentage next to gpucores asks).
	// 0 means unset; when set, MemoryMiB and MemoryLimitMiB must be 0 (the
	// limit equals the resolved memory) and ComputeMilli must be set.
	MemoryShareMilli int64 `json:"memoryShareMilli,omitempty"`
	// MemoryLimitShareMilli is the memory the workload may use on each GPU
	// as a share of the chosen GPU's memory, in thousandths (1000: the
	// whole card, as nvshare's virtual GPU gives). 0 means unset; when set,
	// MemoryLimitMiB and MemoryMiB must be 0 (the guaranteed memory is then
	// MemoryShareMilli, or in proportion to the compute share) and the share
	// must be at least the guaranteed one.
	MemoryLimitShareMilli int64 `json:"memoryLimitShareMilli,omitempty"`
	// Exclusive asks for whole GPUs that no other workload shares.
	Exclusive bool `json:"exclusive,omitempty"`
	// MIGProfile asks for Count MIG instances of this profile ("1g.10gb").
	MIGProfile string `json:"migProfile,omitempty"`
	// Models limits placement to these catalog models (canonical names);
	// empty allows any model.
	Models []string `json:"models,omitempty"`
}

// Fractional reports whether the request shares GPUs (less than a whole GPU each).
func (r GPU) Fractional() bool { return r.ComputeMilli < Whole }

// IsZero reports whether the request asks for no GPU.
func (r GPU) IsZero() bool { return r.Count == 0 }

// FieldError says which field of a request is wrong and what it allows.
type FieldError struct {
	// Field is the request field in its string-form name ("compute-limit").
	Field string
	// Value is the offending value as given, or as stored when given as a number.
	Value string
	// Allowed states the allowed range or values. Other fields it
	// mentions go by their string-form names; AllowedAs renames them.
	Allowed string

	// format and args rebuild Allowed; args of type ref are field names.
	format string
	args   []any
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: must be %s, got %q", e.Field, e.Allowed, e.Value)
}

// AllowedAs is Allowed with every request field it mentions named by
// name (a front door's flag or key for the field; "" keeps the field's
// own name).
func (e *FieldError) AllowedAs(name func(field string) string) string {
	if e.format == "" {
		return e.Allowed
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		args[i] = a
		if r, ok := a.(ref); ok {
			if n := name(string(r)); n != "" {
				args[i] = n
			}
		}
	}
	return fmt.Sprintf(e.format, args...)
}

// ref marks a request field name among a FieldError's arguments.
type ref string

func fieldErr(field, value, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Allowed: fmt.Sprintf(format, args...), format: format, args: args}
}

// Validate checks r against the catalog and returns the first problem as a
// *FieldError. It also checks that each Models entry is a catalog name.
// With a nil catalog it checks only what does not depend on GPU models
// (counts, shares, memory limit against memory, MIG against shares): a
// front door that knows its own GPUs (the host daemon) checks model
// names, memory bounds and MIG profiles against them instead.
func (r GPU) Validate(cat *catalog.Catalog) error {
	if r.Count < 1 || r.Count > MaxCount {
		return fieldErr(FieldCount, fmt.Sprint(r.Count), "a whole number in [1, %d]", MaxCount)
	}
	if r.MemoryShareMilli != 0 {
		switch {
		case r.MemoryShareMilli < 1 || r.MemoryShareMilli > Whole:
			return fieldErr(FieldMemory, quantity.FormatShare(r.MemoryShareMilli)+" of the GPU", "a share in (0, 1] of the GPU's memory, or a size")
		case r.MemoryMiB != 0:
			return fieldErr(FieldMemory, quantity.FormatMiB(r.MemoryMiB), "either a size or a share of the GPU's memory, not both")
		case r.MemoryLimitMiB != 0:
			return fieldErr(FieldMemoryLimit, quantity.FormatMiB(r.MemoryLimitMiB), "empty when %s is a share of the GPU's memory (the limit is that share), or a share of at least it such as 100%%", ref(FieldMemory))
		case r.ComputeMilli == 0:
			return fieldErr(FieldCompute, "", "set when %s is a share of the GPU's memory", ref(FieldMemory))
		case r.MIGProfile != "":
			return fieldErr(FieldMIGProfile, r.MIGProfile, "empty when %s or %s is set (a MIG instance fixes its own memory)", ref(FieldMemory), ref(FieldMemoryLimit))
		}
	}
	if err := r.validateMemoryLimitShare(); err != nil {
		return err
	}
	if r.ComputeMilli == 0 && r.MemoryMiB > 0 {
		// Memory-only share: compute follows memory on the chosen GPU.
		if r.ComputeLimitMilli < 0 || r.ComputeLimitMilli > Whole {
			return fieldErr(FieldComputeLimit, quantity.FormatShare(r.ComputeLimitMilli), "in [0, 1] (0: the share that follows %s)", ref(FieldMemory))
		}
	} else if r.ComputeMilli < 1 || r.ComputeMilli > Whole {
		return fieldErr(FieldCompute, quantity.FormatShare(r.ComputeMilli), "in (0, 1] (a share of one GPU, at most a thousandth fine)")
	} else if r.ComputeLimitMilli < r.ComputeMilli || r.ComputeLimitMilli > Whole {
		return fieldErr(FieldComputeLimit, quantity.FormatShare(r.ComputeLimitMilli), "in [%s, 1] (at least %s, the guaranteed compute)", quantity.FormatShare(r.ComputeMilli), ref(FieldCompute))
	}
	var allowed []catalog.Model
	if cat != nil {
		var err error
		if allowed, err = r.allowedModels(cat); err != nil {
			return err
		}
		largest := allowed[0]
		for _, m := range allowed[1:] {
			if m.MemoryMiB > largest.MemoryMiB {
				largest = m
			}
		}
		if r.MemoryMiB < 0 || r.MemoryMiB > largest.MemoryMiB {
			return fieldErr(FieldMemory, quantity.FormatMiB(r.MemoryMiB), "in [0, %s] (the memory of the largest allowed model, %s)", quantity.FormatMiB(largest.MemoryMiB), largest.Name)
		}
		if r.MemoryLimitMiB != 0 && (r.MemoryLimitMiB < r.MemoryMiB || r.MemoryLimitMiB > largest.MemoryMiB) {
			return fieldErr(FieldMemoryLimit, quantity.FormatMiB(r.MemoryLimitMiB), "in [%s, %s] (at least %s, at most the largest allowed model, %s)", quantity.FormatMiB(r.MemoryMiB), quantity.FormatMiB(largest.MemoryMiB), ref(FieldMemory), largest.Name)
		}
	} else {
		if r.MemoryMiB < 0 {
			return fieldErr(FieldMemory, quantity.FormatMiB(r.MemoryMiB), "at least 0")
		}
		if r.MemoryLimitMiB != 0 && r.MemoryLimitMiB < r.MemoryMiB {
			return fieldErr(FieldMemoryLimit, quantity.FormatMiB(r.MemoryLimitMiB), "at least %s (%s, the guaranteed memory)", quantity.FormatMiB(r.MemoryMiB), ref(FieldMemory))
		}
	}
	if r.Exclusive && r.Fractional() {
		return fieldErr(FieldExclusive, "true", "false when %s is below 1 (an exclusive request takes whole GPUs)", ref(FieldCompute))
	}
	if r.MIGProfile != "" {
		return r.validateMIG(allowed, cat != nil)
	}
	return nil
}

// validateMemoryLimitShare checks a memory limit given as a share of the
// GPU's memory: in (0, 1], at least the guaranteed memory's share, and
// beside no size.
func (r GPU) validateMemoryLimitShare() error {
	s := r.MemoryLimitShareMilli
	if s == 0 {
		return nil
	}
	given := quantity.FormatShare(s) + " of the GPU"
	guaranteed := r.MemoryShareMilli
	if guaranteed == 0 {
		guaranteed = r.ComputeMilli // memory follows the compute share
	}
	switch {
	case s < 1 || s > Whole:
		return fieldErr(FieldMemoryLimit, given, "a share in (0, 1] of the GPU's memory, or a size")
	case r.MemoryLimitMiB != 0:
		return fieldErr(FieldMemoryLimit, quantity.FormatMiB(r.MemoryLimitMiB), "either a size or a share of the GPU's memory, not both")
	case r.MemoryMiB != 0:
		return fieldErr(FieldMemoryLimit, given, "a size when %s is a size (%s), not a share of the GPU's memory", ref(FieldMemory), quantity.FormatMiB(r.MemoryMiB))
	case r.MIGProfile != "":
		return fieldErr(FieldMIGProfile, r.MIGProfile, "empty when %s or %s is set (a MIG instance fixes its own memory)", ref(FieldMemory), ref(FieldMemoryLimit))
	case s < guaranteed:
		return fieldErr(FieldMemoryLimit, given, "a share of at least %s of the GPU's memory (the guaranteed memory's share)", quantity.FormatShare(guaranteed))
	}
	return nil
}

// validateMIG checks a MIG request; with models it checks that one of
// the allowed models offers the profile.
func (r GPU) validateMIG(allowed []catalog.Model, models bool) error {
	if r.Fractional() || r.ComputeLimitMilli != Whole {
		return fieldErr(FieldMIGProfile, r.MIGProfile, "empty when %s or %s is set (a MIG instance fixes its own compute share)", ref(FieldCompute), ref(FieldComputeLimit))
	}
	if r.MemoryMiB != 0 || r.MemoryLimitMiB != 0 {
		return fieldErr(FieldMIGProfile, r.MIGProfile, "empty when %s or %s is set (a MIG instance fixes its own memory)", ref(FieldMemory), ref(FieldMemoryLimit))
	}
	if r.Exclusive {
		return fieldErr(FieldMIGProfile, r.MIGProfile, "empty when %s is true (a MIG instance is a slice, not a whole GPU)", ref(FieldExclusive))
	}
	if !models {
		return nil
	}
	var offered []string
	for _, m := range allowed {
		if _, ok := m.MIGProfile(r.MIGProfile); ok {
			return nil
		}
		if m.SupportsMIG() {
			offered = append(offered, m.Name+" has "+strings.Join(m.MIG.ProfileNames(), ", "))
		}
	}
	if len(offered) == 0 {
		return fieldErr(FieldMIGProfile, r.MIGProfile, "empty: none of the allowed models supports MIG")
	}
	return fieldErr(FieldMIGProfile, r.MIGProfile, "a MIG profile of an allowed model (%s)", strings.Join(offered, "; "))
}

// allowedModels resolves Models against the catalog; an empty list allows
// every model.
func (r GPU) allowedModels(cat *catalog.Catalog) ([]catalog.Model, error) {
	if len(r.Models) == 0 {
		return cat.Models(), nil
	}
	var out []catalog.Model
	for _, name := range r.Models {
		ms, err := cat.MatchOrError(name)
		if err != nil {
			return nil, &FieldError{Field: FieldModel, Value: name, Allowed: "a model from `tessera show-gpus -a` (" + strings.TrimPrefix(err.Error(), "unknown GPU model ") + ")"}
		}
		out = append(out, ms...)
	}
	return out, nil
}

// ResolveCompute returns the guaranteed and limit compute (thousandths) the
// request takes on a GPU with gpuMemMiB of memory, applying the documented
// defaults: a memory-only share guarantees memory/gpuMemMiB of the compute
// (rounded up, at least 1) and bursts to ComputeLimitMilli when that is larger.
func (r GPU) ResolveCompute(gpuMemMiB int64) (guarantee, limit int64) {
	guarantee, limit = r.ComputeMilli, r.ComputeLimitMilli
	if guarantee == 0 && gpuMemMiB > 0 {
		guarantee = min(Whole, max(1, (r.MemoryMiB*Whole+gpuMemMiB-1)/gpuMemMiB))
	}
	return guarantee, max(limit, guarantee)
}

// ResolveMemory returns the guaranteed and limit memory (MiB) the request
// takes on a GPU with gpuMemMiB of memory, applying the documented defaults.
//
// A guarantee derived from the compute share never exceeds a memory limit
// the request names: the limit is the user's cap, and the guarantee only
// a default (one named explicitly above its limit is refused by Validate).
func (r GPU) ResolveMemory(gpuMemMiB int64) (request, limit int64) {
	request = r.MemoryMiB
	if r.MemoryShareMilli > 0 {
		request = gpuMemMiB * r.MemoryShareMilli / Whole
	} else if request == 0 && r.MIGProfile == "" {
		request = gpuMemMiB * r.ComputeMilli / Whole
		if r.MemoryLimitMiB > 0 {
			request = min(request, r.MemoryLimitMiB)
		}
	}
	limit = r.MemoryLimitMiB
	if r.MemoryLimitShareMilli > 0 {
		// At least the guarantee, which rounds the same way.
		limit = max(gpuMemMiB*r.MemoryLimitShareMilli/Whole, request)
	}
	if limit == 0 {
		limit = request
	}
	return request, limit
}
