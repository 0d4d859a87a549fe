package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
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
//
// A MIG device (mig.go) is read as its whole instance: on a GPU Tessera
// manages, one the node creates at prepare (MIG.Create, with the parent
// GPU's UUID until then); on a static one, the existing instance. cat
// names the profiles of managed GPUs; with a nil catalog a MIG device of
// a managed GPU is an error.
func Shares(claim *resourceapi.ResourceClaim, n *inventory.Node, cat *catalog.Catalog) ([]binding.Share, error) {
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
		if sh, ok, err := migShare(n, r.Device, cat); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		} else if ok {
			out = append(out, sh)
			continue
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
		out = append(out, placement.GPUShare(req, gpu.UUID, gpu.Index, gpu.MemoryMiB))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("claim %s: allocates no device of %s", name, DriverName)
	}
	return out, nil
}

// configFor returns the last ShareConfig among an allocation's configs
// that applies to request, or nil when none does.
func configFor(configs []resourceapi.DeviceAllocationConfiguration, request string) (*ShareConfig, error) {
	return lastShareConfig(len(configs), func(i int) ([]string, *resourceapi.OpaqueDeviceConfiguration) {
		return configs[i].Requests, configs[i].Opaque
	}, func(i int) string {
		return fmt.Sprintf("status.allocation.devices.config[%d] (%s)", i, configs[i].Source)
	}, request)
}

// lastShareConfig returns the last of n opaque configurations (at gives
// each one's requests and opaque part) that is DriverName's and applies to
// request: one naming it, or its parent for a subrequest "r/sub", or
// naming none. A configuration that does not decode is an error, placed
// by where.
func lastShareConfig(n int, at func(i int) ([]string, *resourceapi.OpaqueDeviceConfiguration), where func(i int) string, request string) (*ShareConfig, error) {
	parent, _, _ := strings.Cut(request, "/")
	var found *ShareConfig
	for i := range n {
		requests, opaque := at(i)
		if opaque == nil || opaque.Driver != DriverName {
			continue
		}
		if len(requests) > 0 && !slices.Contains(requests, request) && !slices.Contains(requests, parent) {
			continue
		}
		cfg, err := DecodeShareConfig(opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		found = &cfg
	}
	return found, nil
}
