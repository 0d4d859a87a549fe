package dra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/inventory"
)

// classList serves DeviceClasses to the allocator.
type classList []resourceapi.DeviceClass

func (l classList) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	return out, nil
}

func (l classList) Get(name string) (*resourceapi.DeviceClass, error) {
	for i := range l {
		if l[i].Name == name {
			return &l[i], nil
		}
	}
	return nil, fmt.Errorf("device class %s not found", name)
}

// twoShared is a node with two shared H200s and one exclusive A100.
func twoShared() *inventory.Node {
	return &inventory.Node{Name: "n1", GPUs: []inventory.GPU{
		{UUID: "GPU-0", Index: 0, Model: "H200", MemoryMiB: 143771, NUMANode: -1, Health: inventory.Healthy},
		{UUID: "GPU-1", Index: 1, Model: "H200", MemoryMiB: 143771, NUMANode: -1, Health: inventory.Healthy},
		{UUID: "GPU-2", Index: 2, Model: "A100-80GB", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy, Sharing: inventory.SharingExclusive},
	}}
}

// slicesOf are n's ResourceSlices as the resourceslice helper writes them.
func slicesOf(n *inventory.Node) []*resourceapi.ResourceSlice {
	pool := Resources(n).Pools[n.Name]
	out := make([]*resourceapi.ResourceSlice, len(pool.Slices))
	for i, s := range pool.Slices {
		out[i] = &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", n.Name, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   DriverName,
				Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				NodeName: &n.Name,
				Devices:  s.Devices,
			},
		}
	}
	return out
}

func claimFor(name, class string, capacity map[resourceapi.QualifiedName]resource.Quantity, selector string) *resourceapi.ResourceClaim {
	// As the API server defaults it: exactly one device.
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	if capacity != nil {
		req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
	}
	if selector != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}},
	}
}

func compute(v string) map[resourceapi.QualifiedName]resource.Quantity {
	return map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse(v)}
}

// TestAllocatePinned: the structured allocator takes the GPU Tessera's
// placement chose (not its own first fit), books the memory Tessera's
// rules give a compute-only share, refuses what does not fit the chosen
// GPU or its selectors, and counts what earlier claims took.
func TestAllocatePinned(t *testing.T) {
	ctx := context.Background()
	n := twoShared()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	classes := classList(DeviceClasses(""))
	slices := slicesOf(n)
	state := NewAllocatedState(nil)
	var kept []*resourceapi.ResourceClaim
	allocate := func(c *resourceapi.ResourceClaim, chosen ...string) (*resourceapi.AllocationResult, error) {
		t.Helper()
		res, err := Allocate(ctx, Pinned{
			Node: node, Inventory: n, Claims: []*resourceapi.ResourceClaim{c}, Chosen: map[types.UID][]string{c.UID: chosen},
			Slices: slices, Classes: classes, State: &state, Features: SchedulerFeatures(),
		})
		if err != nil {
			return nil, err
		}
		if len(res) != 1 {
			t.Fatalf("claim %s: %d results, want 1", c.Name, len(res))
		}
		c.Status.Allocation = &res[0]
		kept = append(kept, c)
		return &res[0], nil
	}

	// First fit would take gpu-0; Tessera chose gpu-1.
	a, err := allocate(claimFor("a", ClassSharedGPU, compute("0.5"), ""), "gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	r := a.Devices.Results[0]
	if r.Device != "gpu-1" || r.Pool != "n1" || r.Driver != DriverName || r.ShareID == nil {
		t.Fatalf("claim a allocated %+v, want a share of gpu-1", r)
	}
	// Half of 143,771 MiB in whole MiB, as a tessera.io/gpu-compute: 0.5 share books it.
	if c, m := r.ConsumedCapacity[CapacityCompute], r.ConsumedCapacity[CapacityMemory]; c.Cmp(resource.MustParse("500m")) != 0 || m.Cmp(resource.MustParse("71885Mi")) != 0 {
		t.Errorf("claim a consumed %v, want compute 500m and 71885Mi (half the GPU's memory)", r.ConsumedCapacity)
	}
	// What the node will hand out reads the same share back.
	if sh, err := Shares(kept[0], n, nil); err != nil || len(sh) != 1 || sh[0].UUID != "GPU-1" || sh[0].ComputeMilli != 500 || sh[0].MemoryMiB != 71885 {
		t.Errorf("shares of claim a %+v, %v; want 500m of GPU-1 with 71885 MiB", sh, err)
	}

	// 0.6 more does not fit gpu-1, whatever the allocator would like.
	if _, err := allocate(claimFor("b", ClassSharedGPU, compute("0.6"), ""), "gpu-1"); !errors.Is(err, ErrNoFit) {
		t.Errorf("0.6 on a half-taken gpu-1: %v, want ErrNoFit", err)
	}
	// On gpu-0 it does, and memory named is memory booked.
	b := claimFor("b", ClassSharedGPU, map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse("0.6"), CapacityMemory: resource.MustParse("10Gi")}, "")
	if res, err := allocate(b, "gpu-0"); err != nil || res.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("claim b: %+v, %v; want gpu-0", res, err)
	} else if m := res.Devices.Results[0].ConsumedCapacity[CapacityMemory]; m.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("claim b booked memory %v, want the 10Gi it named", m.String())
	}
	// A selector the chosen GPU fails is no fit; a broken one is an error of the claim.
	if _, err := allocate(claimFor("c", ClassGPU, compute("0.1"), `device.attributes["gpu.tessera.io"].model == "A100-80GB"`), "gpu-0"); !errors.Is(err, ErrNoFit) {
		t.Errorf("an H200 chosen for an A100 selector: %v, want ErrNoFit", err)
	}
	if _, err := allocate(claimFor("d", ClassGPU, compute("0.1"), `device.attributes["gpu.tessera.io"].model ==`), "gpu-0"); err == nil || errors.Is(err, ErrNoFit) {
		t.Errorf("a broken selector: %v, want an error of the claim", err)
	} else if !strings.Contains(err.Error(), "ml/d") {
		t.Errorf("the error does not name the claim: %v", err)
	}
	// A whole GPU on the exclusive A100, once.
	if res, err := allocate(claimFor("e", ClassGPU, nil, ""), "gpu-2"); err != nil || res.Devices.Results[0].Device != "gpu-2" || res.Devices.Results[0].ShareID != nil {
		t.Fatalf("whole claim e: %+v, %v; want gpu-2 whole", res, err)
	}
	if _, err := allocate(claimFor("f", ClassGPU, nil, ""), "gpu-2"); !errors.Is(err, ErrNoFit) {
		t.Errorf("a second whole claim on gpu-2: %v, want ErrNoFit", err)
	}
	// Nothing chosen: none of Tessera's devices is shown.
	if _, err := allocate(claimFor("g", ClassSharedGPU, compute("0.1"), "")); !errors.Is(err, ErrNoFit) {
		t.Errorf("a claim with no device chosen: %v, want ErrNoFit", err)
	}

	// The state rebuilt from the stored claims is the state kept along:
	// gpu-1 still has no room for 0.6.
	rebuilt := NewAllocatedState(kept)
	c := claimFor("h", ClassSharedGPU, compute("0.6"), "")
	_, err = Allocate(ctx, Pinned{Node: node, Inventory: n, Claims: []*resourceapi.ResourceClaim{c}, Chosen: map[types.UID][]string{c.UID: {"gpu-1"}},
		Slices: slices, Classes: classes, State: &rebuilt, Features: SchedulerFeatures()})
	if !errors.Is(err, ErrNoFit) {
		t.Errorf("0.6 on gpu-1 after a rebuild of the state: %v, want ErrNoFit", err)
	}
	if _, err := Allocate(ctx, Pinned{Node: node, Inventory: n, Claims: []*resourceapi.ResourceClaim{kept[0]}, State: &rebuilt}); err == nil {
		t.Error("an allocated claim allocated again")
	}
}
