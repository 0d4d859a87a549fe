package request

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/quantity"
)

// Field names of the string form of a request. Adapters map their own names
// (flags, annotations) onto these and report errors under their own names.
const (
	FieldCount        = "count"
	FieldCompute      = "compute"
	FieldComputeLimit = "compute-limit"
	FieldMemory       = "memory"
	FieldMemoryLimit  = "memory-limit"
	FieldExclusive    = "exclusive"
	FieldMIGProfile   = "mig-profile"
	FieldModel        = "model"
)

// Fields lists every field name Parse accepts.
func Fields() []string {
	return []string{FieldCount, FieldCompute, FieldComputeLimit, FieldMemory, FieldMemoryLimit, FieldExclusive, FieldMIGProfile, FieldModel}
}

// Parse builds and validates a request from string fields. Absent fields
// take these defaults: count 1; compute 1 (a whole GPU), or, when memory is
// given, in proportion to memory on the chosen GPU (a memory-only share);
// compute-limit equal to compute; memory 0 (in proportion to compute on the
// chosen GPU); memory-limit equal to memory; exclusive false; any model. An
// empty map is an error: it asks for nothing.
//
// Values: count is a whole number; compute and compute-limit are shares
// ("0.25", "25%", "250m"); memory and memory-limit are sizes ("20Gi"), and
// either may instead be a percentage of the chosen GPU's memory ("25%",
// which needs compute; a percentage memory-limit needs memory unset or a
// percentage too, and at least the guaranteed share);
// exclusive is true or false; model is a list separated by "," or "|".
//
// With a nil catalog Parse checks only what does not depend on GPU models
// (see Validate) and keeps model names as given.
func Parse(fields map[string]string, cat *catalog.Catalog) (GPU, error) {
	if len(fields) == 0 {
		return GPU{}, fmt.Errorf("empty GPU request: set at least %s", FieldCount)
	}
	known := Fields()
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			return GPU{}, &FieldError{Field: k, Value: fields[k], Allowed: "one of the fields " + strings.Join(known, ", ") + " (unknown field)"}
		}
	}
	r := GPU{Count: 1, ComputeMilli: Whole}
	if v, ok := fields[FieldCount]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxCount {
			return GPU{}, fieldErr(FieldCount, v, "a whole number in [1, %d]", MaxCount)
		}
		r.Count = n
	}
	var err error
	_, hasCompute := fields[FieldCompute]
	_, hasMemory := fields[FieldMemory]
	_, hasMemoryLimit := fields[FieldMemoryLimit]
	limitShare := hasMemoryLimit && strings.HasSuffix(strings.TrimSpace(fields[FieldMemoryLimit]), "%")
	if limitShare && !hasCompute && !hasMemory {
		return GPU{}, fieldErr(FieldCompute, "", "set when %s is a percentage of the GPU's memory (a share such as 0.1; the guaranteed memory follows it)", ref(FieldMemoryLimit))
	}
	if !hasCompute && hasMemoryLimit && !hasMemory {
		return GPU{}, fieldErr(FieldMemory, "", "set when %s is set without %s: a size such as 20Gi", ref(FieldMemoryLimit), ref(FieldCompute))
	}
	memoryShare := hasMemory && strings.HasSuffix(strings.TrimSpace(fields[FieldMemory]), "%")
	if memoryShare && !hasCompute {
		return GPU{}, fieldErr(FieldCompute, "", "set when %s is a percentage of the GPU's memory (a share such as 0.25)", ref(FieldMemory))
	}
	if !hasCompute && hasMemory {
		r.ComputeMilli = 0 // memory-only share: compute follows memory
	}
	if hasCompute {
		if r.ComputeMilli, err = parseShare(FieldCompute, fields[FieldCompute]); err != nil {
			return GPU{}, err
		}
	}
	r.ComputeLimitMilli = r.ComputeMilli
	if v, ok := fields[FieldComputeLimit]; ok {
		if r.ComputeLimitMilli, err = parseShare(FieldComputeLimit, v); err != nil {
			return GPU{}, err
		}
	}
	if v, ok := fields[FieldMemory]; ok && memoryShare {
		if r.MemoryShareMilli, err = quantity.ParseShare(strings.TrimSpace(v)); err != nil || r.MemoryShareMilli < 1 || r.MemoryShareMilli > Whole {
			return GPU{}, fieldErr(FieldMemory, v, "a size such as 20Gi, or a percentage of the GPU's memory in (0%%, 100%%] such as 25%%")
		}
	} else if ok {
		if r.MemoryMiB, err = parseMemory(FieldMemory, v); err != nil {
			return GPU{}, err
		}
	}
	if v, ok := fields[FieldMemoryLimit]; ok && limitShare {
		if r.MemoryLimitShareMilli, err = quantity.ParseShare(strings.TrimSpace(v)); err != nil || r.MemoryLimitShareMilli < 1 || r.MemoryLimitShareMilli > Whole {
			return GPU{}, fieldErr(FieldMemoryLimit, v, "a size such as 20Gi, or a percentage of the GPU's memory in (0%%, 100%%] such as 100%%")
		}
	} else if ok {
		if r.MemoryLimitMiB, err = parseMemory(FieldMemoryLimit, v); err != nil {
			return GPU{}, err
		}
	}
	if v, ok := fields[FieldExclusive]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			r.Exclusive = true
		case "false":
		default:
			return GPU{}, fieldErr(FieldExclusive, v, "true or false")
		}
	}
	if v, ok := fields[FieldMIGProfile]; ok {
		r.MIGProfile = strings.TrimSpace(v)
		if r.MIGProfile == "" {
			return GPU{}, fieldErr(FieldMIGProfile, v, "a MIG profile name such as 1g.10gb")
		}
	}
	if v, ok := fields[FieldModel]; ok {
		for _, name := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '|' }) {
			if name = strings.TrimSpace(name); name != "" {
				r.Models = append(r.Models, name)
			}
		}
		if len(r.Models) == 0 {
			return GPU{}, fieldErr(FieldModel, v, "a list of GPU models such as H200 or A100-80GB|H100")
		}
	}
	if err := r.Validate(cat); err != nil {
		return GPU{}, err
	}
	r.Models = canonicalModels(r.Models, cat)
	return r, nil
}

func parseShare(field, v string) (int64, error) {
	m, err := quantity.ParseShare(v)
	if err != nil || m < 1 || m > Whole {
		return 0, fieldErr(field, v, "a share in (0, 1], written 0.25, 25%% or 250m, at most a thousandth fine")
	}
	return m, nil
}

func parseMemory(field, v string) (int64, error) {
	m, err := quantity.ParseMiB(v)
	if err != nil {
		return 0, fieldErr(field, v, "a size such as 20Gi or 512Mi (%v)", err)
	}
	if m < 1 {
		return 0, fieldErr(field, v, "at least 1Mi")
	}
	return m, nil
}

// canonicalModels expands families and aliases to sorted canonical names.
func canonicalModels(names []string, cat *catalog.Catalog) []string {
	if len(names) == 0 || cat == nil {
		return names
	}
	var out []string
	for _, n := range names {
		for _, m := range cat.Match(n) {
			if !slices.Contains(out, m.Name) {
				out = append(out, m.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}
