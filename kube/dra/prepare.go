package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
)

// Shares reads what an allocated claim gives Tessera's driver on node n:
// one share per device of DriverName the allocation names, in its order,
// with the GPU's UUID and index, the guarantee the allocation consumed
// (consumedCapacity; a device allocated whole is a whole GPU) and the
// burst limits of the last opaque ShareConfig for the device's request
// (class configuration first, then the claim's, as DRA orders them).
// Memory the allocation did not book follows compute on the GPU (dra.Share).
// It is what the kubelet plugin hands the container and the node arbiter,
// as the device plugin does with an assignment's shares. Errors name the
// claim and what is wrong: not allocated, a device of another node, a
// device the node does not have, a bad configuration.
func Shares(claim *resourceapi.ResourceClaim, n *inventory.Node) ([]binding.Share, error) {
	name := claim.Namespace + "/" + claim.Name
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil, fmt.Errorf("claim %s: not allocated", name)
	}
	var out []binding.Share
	for i, r := range alloc.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		at := fmt.Sprintf("claim %s: status.allocation.devices.results[%d]", name, i)
		if r.Pool != n.Name {
			return nil, fmt.Errorf("%s: device %s of pool %s, not of this node %s", at, r.Device, r.Pool, n.Name)
		}
		gi := slices.IndexFunc(n.GPUs, func(g inventory.GPU) bool { return DeviceName(g.Index) == r.Device })
		if gi < 0 {
			return nil, fmt.Errorf("%s: node %s has no device %s", at, n.Name, r.Device)
		}
		gpu := &n.GPUs[gi]
		cfg, err := configFor(alloc.Devices.Config, r.Request)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", name, err)
		}
		// DRA lists every capacity consumed, zero included: memory 0 is
		// memory the request did not name.
		consumed := maps.Clone(r.ConsumedCapacity)
		if m, ok := consumed[CapacityMemory]; ok && m.IsZero() {
			delete(consumed, CapacityMemory)
		}
		req, err := Share(consumed, cfg, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		s := binding.Share{UUID: gpu.UUID, Index: gpu.Index}
		s.ComputeMilli, s.ComputeLimitMilli = req.ResolveCompute(gpu.MemoryMiB)
		s.MemoryMiB, s.MemoryLimitMiB = req.ResolveMemory(gpu.MemoryMiB)
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("claim %s: allocates no device of %s", name, DriverName)
	}
	return out, nil
}

// configFor returns the last ShareConfig among configs that applies to
// request (a request "r/sub" of a firstAvailable list is configured under
// "r/sub" or "r"), or nil when none does.
func configFor(configs []resourceapi.DeviceAllocationConfiguration, request string) (*ShareConfig, error) {
	parent, _, _ := strings.Cut(request, "/")
	var found *ShareConfig
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != DriverName {
			continue
		}
		if len(c.Requests) > 0 && !slices.Contains(c.Requests, request) && !slices.Contains(c.Requests, parent) {
			continue
		}
		cfg, err := DecodeShareConfig(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("status.allocation.devices.config[%d] (%s): %w", i, c.Source, err)
		}
		found = &cfg
	}
	return found, nil
}
