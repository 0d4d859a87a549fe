package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/inventory"
)

// SchedulerFeatures are the structured allocator's features that
// kube-scheduler v1.37 enables by default (docs/dra.md's feature-gate
// table; DRAFractionalCapacityRange is off there, a v1.37 binary's
// minimum compatibility version being 1.36): Tessera's scheduler
// allocates with the same, so a claim it accepts is one kube-scheduler
// would accept and the reverse. Tessera's devices do not need the
// fractional range (their compute has no step).
func SchedulerFeatures() structured.Features {
	return structured.Features{
		AdminAccess:            true,
		ConsumableCapacity:     true,
		DeviceBindingAndStatus: true,
		DeviceTaints:           true,
		PartitionableDevices:   true,
		PrioritizedList:        true,
	}
}

// NewAllocatedState returns what the allocated claims among claims hold,
// as the structured allocator reads it: devices taken whole, shares of
// devices allocated many times, and the capacity those shares consume.
// A claim shared by many pods is one claim here and counts once.
func NewAllocatedState(claims []*resourceapi.ResourceClaim) structured.AllocatedState {
	st := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			Record(&st, c.Status.Allocation)
		}
	}
	return st
}

// Record adds what allocation a holds to st.
func Record(st *structured.AllocatedState, a *resourceapi.AllocationResult) {
	for _, r := range a.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue // admin access takes nothing from the device
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID == nil {
			st.AllocatedDevices.Insert(id)
			continue
		}
		st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
		st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
	}
}

// ErrNoFit says that the claims cannot be allocated on the devices given:
// not an error of the claims, the caller tries elsewhere.
var ErrNoFit = errors.New("the claims do not fit the chosen devices")

// Pinned is one allocation to make: claims on one node, with the devices
// of Tessera's driver that Tessera's placement chose for each claim.
type Pinned struct {
	Node *corev1.Node
	// Inventory is the node's inventory (the GPUs' memory, for the memory
	// a share that names none books).
	Inventory *inventory.Node
	// Claims are the unallocated claims to allocate, in order.
	Claims []*resourceapi.ResourceClaim
	// Chosen names, per claim UID, the devices of DriverName in the node's
	// pool the claim may take; a claim not named may take none of them
	// (it asks for other drivers' devices only).
	Chosen map[types.UID][]string
	// Slices are the ResourceSlices of every driver (only the node's are
	// read), Classes the DeviceClasses.
	Slices  []*resourceapi.ResourceSlice
	Classes structured.DeviceClassLister
	// State is what allocated claims hold; Allocate adds its results to it.
	State    *structured.AllocatedState
	Features structured.Features
	CEL      *cel.Cache
}

// Allocate allocates each claim of p in order with Kubernetes' structured
// allocator (what kube-scheduler runs), showing it of Tessera's devices
// only those Tessera's placement chose for the claim: the policy decides
// which GPU, the upstream code checks the claim against the device
// (selectors, classes, capacity policies, taints) and writes the result,
// so the allocation is one kube-scheduler would accept. Devices of other
// drivers are left to the allocator's own choice.
//
// Shares that name no memory book the memory Tessera's rules give them
// (in proportion to compute on the chosen GPU, Share): the result's
// consumedCapacity says so, where the allocator alone would book none.
//
// It returns one result per claim, in order, and records them in p.State.
// ErrNoFit (wrapped, naming the claim) when a claim does not fit what it
// is shown; any other error is the claim's or the class's (a bad
// selector, a bad configuration).
func Allocate(ctx context.Context, p Pinned) ([]resourceapi.AllocationResult, error) {
	if p.Node == nil || p.Inventory == nil || p.State == nil {
		return nil, errors.New("allocate claims: node, inventory and allocated state must be set")
	}
	if p.CEL == nil {
		p.CEL = cel.NewCache(10, cel.Features{})
	}
	out := make([]resourceapi.AllocationResult, 0, len(p.Claims))
	for _, claim := range p.Claims {
		name := claim.Namespace + "/" + claim.Name
		if claim.Status.Allocation != nil {
			return nil, fmt.Errorf("claim %s: already allocated", name)
		}
		shown := showOnly(p.Slices, p.Node.Name, append(slices.Clone(p.Chosen[claim.UID]), taken(p.State, p.Node.Name)...))
		a, err := structured.NewAllocator(ctx, p.Features, *p.State, p.Classes, shown, p.CEL)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", name, err)
		}
		res, err := a.Allocate(ctx, p.Node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			if strings.Contains(err.Error(), "claim "+name) {
				return nil, err // the allocator names the claim itself
			}
			return nil, fmt.Errorf("claim %s: %w", name, err)
		}
		if len(res) != 1 {
			return nil, fmt.Errorf("claim %s on node %s, devices %v: %w", name, p.Node.Name, p.Chosen[claim.UID], ErrNoFit)
		}
		if err := bookMemory(claim, &res[0], p.Inventory); err != nil {
			return nil, err
		}
		Record(p.State, &res[0])
		out = append(out, res[0])
	}
	return out, nil
}

// showOnly returns slices with the devices of DriverName in node's pool
// cut down to those named (and none of DriverName's other pools). Slices
// keep their number in the pool, so the allocator still sees it complete.
//
// Allocate names also the devices allocated claims hold whole (taken):
// the allocator takes none of them again, but it counts what they consume
// of their counter sets (a MIG device's memory slices), so the chosen
// device is checked against them.
func showOnly(all []*resourceapi.ResourceSlice, node string, names []string) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(all))
	for _, s := range all {
		if s.Spec.Driver != DriverName {
			out = append(out, s)
			continue
		}
		if s.Spec.Pool.Name != node {
			continue
		}
		cut := s.DeepCopy()
		cut.Spec.Devices = slices.DeleteFunc(cut.Spec.Devices, func(d resourceapi.Device) bool { return !slices.Contains(names, d.Name) })
		out = append(out, cut)
	}
	return out
}

// taken names the devices of Tessera's pool node that allocated claims
// hold whole.
func taken(st *structured.AllocatedState, node string) []string {
	var out []string
	for id := range st.AllocatedDevices {
		if id.Driver.String() == DriverName && id.Pool.String() == node {
			out = append(out, id.Device.String())
		}
	}
	return out
}

// bookMemory writes into a share's consumedCapacity the memory Tessera's
// rules give a request that named none (the allocator books 0 by the
// device's policy).
func bookMemory(claim *resourceapi.ResourceClaim, a *resourceapi.AllocationResult, n *inventory.Node) error {
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.Driver != DriverName || r.ShareID == nil {
			continue
		}
		m, named := r.ConsumedCapacity[CapacityMemory]
		if named && !m.IsZero() {
			continue
		}
		gi := slices.IndexFunc(n.GPUs, func(g inventory.GPU) bool { return DeviceName(g.Index) == r.Device })
		if gi < 0 {
			return fmt.Errorf("claim %s/%s: node %s has no device %s", claim.Namespace, claim.Name, n.Name, r.Device)
		}
		consumed := map[resourceapi.QualifiedName]resource.Quantity{}
		if c, ok := r.ConsumedCapacity[CapacityCompute]; ok {
			consumed[CapacityCompute] = c
		}
		req, err := Share(consumed, nil, nil)
		if err != nil {
			return fmt.Errorf("claim %s/%s: status.allocation.devices.results[%d]: %w", claim.Namespace, claim.Name, i, err)
		}
		mem, _ := req.ResolveMemory(n.GPUs[gi].MemoryMiB)
		if r.ConsumedCapacity == nil {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{}
		}
		r.ConsumedCapacity[CapacityMemory] = *resource.NewQuantity(mem*mib, resource.BinarySI)
	}
	return nil
}
