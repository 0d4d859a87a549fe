package dra

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/request"
)

// ClaimRequest is what one request of a claim asks of Tessera's GPUs, as
// the placement reads it.
type ClaimRequest struct {
	// Name is the request's name in the claim; "name/sub" for the
	// subrequest of a firstAvailable list that Tessera places.
	Name string
	GPU  request.GPU
	// SharedOnly is set for the class that selects only GPUs that take
	// shares (ClassSharedGPU).
	SharedOnly bool
}

// Requests reads what claim asks of Tessera's GPUs: one ClaimRequest per
// request of one of Tessera's DeviceClasses, in the claim's order. other
// is true when some request asks for another driver's devices, which the
// structured allocator chooses on the node Tessera picks. A request with
// admin access takes nothing and is left out.
//
// A request of N devices with no capacity is N whole GPUs; a request with
// capacity is one share (Share). For a firstAvailable list, Tessera places
// its first subrequest of Tessera's classes (the allocator, run on the
// chosen GPUs, still takes the first that fits them). What Tessera cannot
// place is refused naming the field: allocationMode All, several shares
// in one request.
//
// Only the claim's own configuration is read for burst limits: Tessera's
// DeviceClasses carry none.
func Requests(claim *resourceapi.ResourceClaim, cat *catalog.Catalog) (reqs []ClaimRequest, other bool, err error) {
	name := claim.Namespace + "/" + claim.Name
	for i, r := range claim.Spec.Devices.Requests {
		path := fmt.Sprintf("spec.devices.requests[%d]", i)
		ex, reqName := r.Exactly, r.Name
		if ex == nil {
			k := slices.IndexFunc(r.FirstAvailable, func(s resourceapi.DeviceSubRequest) bool { return IsClass(s.DeviceClassName) })
			if k < 0 {
				other = true
				continue
			}
			s := r.FirstAvailable[k]
			path = fmt.Sprintf("%s.firstAvailable[%d]", path, k)
			reqName = r.Name + "/" + s.Name
			ex = &resourceapi.ExactDeviceRequest{DeviceClassName: s.DeviceClassName, Selectors: s.Selectors,
				AllocationMode: s.AllocationMode, Count: s.Count, Capacity: s.Capacity}
		}
		if !IsClass(ex.DeviceClassName) {
			other = true
			continue
		}
		if ex.AdminAccess != nil && *ex.AdminAccess {
			continue
		}
		if ex.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return nil, false, fmt.Errorf("claim %s: %s.allocationMode: must be ExactCount for %s (Tessera places a number of GPUs), got All", name, path, ex.DeviceClassName)
		}
		count := max(ex.Count, 1)
		if count > request.MaxCount {
			return nil, false, fmt.Errorf("claim %s: %s.count: must be in [1, %d], got %d", name, path, request.MaxCount, count)
		}
		cfg, err := claimConfigFor(claim.Spec.Devices.Config, reqName)
		if err != nil {
			return nil, false, fmt.Errorf("claim %s: %w", name, err)
		}
		if ex.DeviceClassName == ClassMIG {
			g, err := migRequest(ex, cfg, cat, path)
			if err != nil {
				return nil, false, fmt.Errorf("claim %s: %w", name, err)
			}
			g.Count = int(count)
			reqs = append(reqs, ClaimRequest{Name: reqName, GPU: g})
			continue
		}
		if i, named := namesMIGProfile(ex.Selectors); named {
			return nil, false, fmt.Errorf("claim %s: %s.selectors[%d]: names a MIG profile, but %s gives GPUs that are not in MIG mode (no device of it has one); ask %s for a MIG instance", name, path, i, ex.DeviceClassName, ClassMIG)
		}
		var g request.GPU
		if ex.Capacity == nil || len(ex.Capacity.Requests) == 0 {
			g, err = Share(nil, cfg, cat)
		} else {
			if count > 1 {
				return nil, false, fmt.Errorf("claim %s: %s.count: must be 1 for a request with capacity (one share per request; write one request per share), got %d", name, path, count)
			}
			g, err = Share(ex.Capacity.Requests, cfg, cat)
		}
		if err != nil {
			return nil, false, fmt.Errorf("claim %s: %s: %w", name, path, err)
		}
		g.Count = int(count)
		reqs = append(reqs, ClaimRequest{Name: reqName, GPU: g, SharedOnly: ex.DeviceClassName == ClassSharedGPU})
	}
	return reqs, other, nil
}

// IsClass reports whether class is one of Tessera's DeviceClasses.
func IsClass(class string) bool {
	return class == ClassGPU || class == ClassSharedGPU || class == ClassMIG
}

// migRequest reads a request of ClassMIG (at path): whole instances of
// the profile its selector names, with no capacity and no ShareConfig (an
// instance fixes its own compute and memory).
func migRequest(ex *resourceapi.ExactDeviceRequest, cfg *ShareConfig, cat *catalog.Catalog, path string) (request.GPU, error) {
	if ex.Capacity != nil && len(ex.Capacity.Requests) > 0 {
		return request.GPU{}, fmt.Errorf("%s.capacity: must be empty for %s (a MIG instance is taken whole: its profile fixes its compute and memory)", path, ClassMIG)
	}
	if cfg != nil {
		return request.GPU{}, fmt.Errorf("%s: a %s configures no %s (a MIG instance has no burst: its profile fixes its compute and memory)", path, ConfigKind, ClassMIG)
	}
	profile, err := migProfileOf(ex.Selectors, cat, path)
	if err != nil {
		return request.GPU{}, err
	}
	return request.GPU{Count: 1, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: profile}, nil
}

// claimConfigFor returns the last ShareConfig among a claim's own
// configurations that applies to req, or nil when none does.
func claimConfigFor(configs []resourceapi.DeviceClaimConfiguration, req string) (*ShareConfig, error) {
	return lastShareConfig(len(configs), func(i int) ([]string, *resourceapi.OpaqueDeviceConfiguration) {
		return configs[i].Requests, configs[i].Opaque
	}, func(i int) string { return fmt.Sprintf("spec.devices.config[%d]", i) }, req)
}
