package dra

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/request"
)

// The opaque configuration of a share (a claim's
// spec.devices.config[].opaque with driver gpu.tessera.io).
const (
	ConfigAPIVersion = DriverName + "/v1alpha1"
	ConfigKind       = "ShareConfig"
)

// ShareConfig is what a share needs beyond the capacity it consumes: its
// burst limits, which DRA's capacity cannot say (a device's capacity is
// what an allocation takes for good, a burst is what it may use while
// others idle).
type ShareConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ComputeLimit is the compute the share may use when the GPU is idle:
	// a share in [the requested compute, 1] ("0.8", "80%", "800m").
	ComputeLimit string `json:"computeLimit,omitempty"`
	// MemoryLimit is the memory it may use: a size at least the requested
	// memory ("40Gi"), or a percentage of the GPU's memory.
	MemoryLimit string `json:"memoryLimit,omitempty"`
}

// Where each part of a share is written in a claim, for error messages.
const (
	pathCompute      = "spec.devices.requests[].exactly.capacity.requests.compute"
	pathMemory       = "spec.devices.requests[].exactly.capacity.requests.memory"
	pathCapacity     = "spec.devices.requests[].exactly.capacity.requests"
	pathComputeLimit = "spec.devices.config[].opaque.parameters.computeLimit"
	pathMemoryLimit  = "spec.devices.config[].opaque.parameters.memoryLimit"
)

// DecodeShareConfig reads the parameters of an opaque configuration for
// DriverName. Unknown fields, another apiVersion or kind are errors.
func DecodeShareConfig(raw []byte) (ShareConfig, error) {
	var c ShareConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return ShareConfig{}, fmt.Errorf("spec.devices.config[].opaque.parameters (driver %s): %w", DriverName, err)
	}
	if c.APIVersion != ConfigAPIVersion || c.Kind != ConfigKind {
		return ShareConfig{}, fmt.Errorf("spec.devices.config[].opaque.parameters (driver %s): must be apiVersion %s, kind %s, got %q, %q",
			DriverName, ConfigAPIVersion, ConfigKind, c.APIVersion, c.Kind)
	}
	return c, nil
}

// Share is Tessera's request for one device of a claim's request:
// capacity is what the request asks (capacity.requests; nil when it names
// none), cfg its opaque configuration (nil when none). A request that
// names no capacity is a whole GPU, as DRA's defaults make it; one that
// names compute only gets memory in proportion to compute on the GPU it is
// given, and one that names memory only compute in proportion to memory
// (Tessera's rule for shares; docs/dra.md says how it differs from
// DRA's defaults). Errors name the claim's field, the value and the
// allowed range. With a nil catalog, model-dependent checks are left to
// the placement.
func Share(capacity map[resourceapi.QualifiedName]resource.Quantity, cfg *ShareConfig, cat *catalog.Catalog) (request.GPU, error) {
	fields := map[string]string{request.FieldCount: "1"}
	names := make([]string, 0, len(capacity))
	for name := range capacity {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		q := capacity[resourceapi.QualifiedName(name)]
		switch resourceapi.QualifiedName(name) {
		case CapacityCompute:
			fields[request.FieldCompute] = q.String()
		case CapacityMemory:
			if q.Sign() <= 0 {
				return request.GPU{}, fmt.Errorf("%s: must be at least 1Mi, got %q", pathMemory, q.String())
			}
			// DRA rounds a request up to the policy's step (1Mi).
			b := q.Value()
			fields[request.FieldMemory] = strconv.FormatInt((b+mib-1)/mib, 10) + "Mi"
		default:
			return request.GPU{}, fmt.Errorf("%s: unknown capacity %q: devices of %s have %s and %s", pathCapacity, name, DriverName, CapacityCompute, CapacityMemory)
		}
	}
	if cfg != nil {
		if cfg.ComputeLimit != "" {
			fields[request.FieldComputeLimit] = cfg.ComputeLimit
		}
		if cfg.MemoryLimit != "" {
			fields[request.FieldMemoryLimit] = cfg.MemoryLimit
		}
	}
	g, err := request.Parse(fields, cat)
	if err != nil {
		var fe *request.FieldError
		if errors.As(err, &fe) {
			return request.GPU{}, fmt.Errorf("%s: must be %s, got %q", claimPath(fe.Field), fe.AllowedAs(claimPath), fe.Value)
		}
		return request.GPU{}, err
	}
	return g, nil
}

// claimPath names a request field where a claim writes it.
func claimPath(field string) string {
	switch field {
	case request.FieldCompute:
		return pathCompute
	case request.FieldMemory:
		return pathMemory
	case request.FieldComputeLimit:
		return pathComputeLimit
	case request.FieldMemoryLimit:
		return pathMemoryLimit
	}
	return strings.TrimSpace(field)
}
