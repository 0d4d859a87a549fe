package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// migNode has a GPU of each kind: 0 not in MIG mode, 1 in MIG mode managed
// by Tessera (dynamic MIG), 2 in MIG mode as the operator laid it out
// (static MIG: two instances).
func migNode() *inventory.Node {
	return &inventory.Node{Name: "mig-node", GPUs: []inventory.GPU{
		{UUID: "GPU-plain", Index: 0, Model: "H100-SXM", MemoryMiB: 81559, NUMANode: 0, Health: inventory.Healthy},
		{UUID: "GPU-dynamic", Index: 1, Model: "H100-SXM", MemoryMiB: 81559, NUMANode: 0, Health: inventory.Healthy,
			MIGMode: inventory.MIGEnabled, MIGManaged: true},
		{UUID: "GPU-static", Index: 2, Model: "H100-SXM", MemoryMiB: 81559, NUMANode: 1, Health: inventory.Healthy,
			MIGMode: inventory.MIGEnabled, MIGInstances: []inventory.MIGInstance{
				{UUID: "MIG-a", Profile: "3g.40gb", MemoryMiB: 40192, Start: inventory.Slot(0)},
				{UUID: "MIG-b", Profile: "3g.40gb", MemoryMiB: 40192, Start: inventory.Slot(4)},
			}},
	}}
}

// TestMIGDevices: a managed MIG GPU is one device per profile and start
// slot of its model, consuming its memory slices, compute slices and (for
// +me) media engines from the GPU's counter set; a static one is its
// instances; names are DNS labels and unique; a model without MIG
// profiles is an error naming the GPU.
func TestMIGDevices(t *testing.T) {
	cat := catalog.Default()
	n := migNode()
	devs, sets, err := MIGDevices(n, cat)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cat.Lookup("H100-SXM")
	want := 0
	for _, p := range m.MIG.Profiles {
		want += len(p.Starts)
	}
	if len(devs) != want+2 {
		t.Fatalf("%d MIG devices, want %d placements of the managed GPU and 2 instances of the static one", len(devs), want)
	}
	seen := map[string]bool{}
	for _, d := range devs {
		if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 || seen[d.Name] {
			t.Errorf("device name %q: %v (seen before: %v)", d.Name, errs, seen[d.Name])
		}
		seen[d.Name] = true
		if s := d.Attributes[AttrSharing].StringValue; s == nil || *s != inventory.SharingExclusive {
			t.Errorf("device %s: sharing %v, want exclusive (no shares of a MIG instance)", d.Name, s)
		}
	}
	if len(sets) != 1 || sets[0].Name != CounterSetName(1) || len(sets[0].Counters) != m.MIG.MemorySlices+2 {
		t.Fatalf("counter sets %+v, want one for GPU 1 with %d memory slices, compute slices and media", sets, m.MIG.MemorySlices)
	}
	if c := sets[0].Counters[CounterComputeSlices]; c.Value.Value() != int64(m.MIG.ComputeSlices) {
		t.Errorf("compute slices %v, want %d", c.Value, m.MIG.ComputeSlices)
	}
	byName := map[string]resourceapi.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	uses := func(name string) []string {
		d, ok := byName[name]
		if !ok || len(d.ConsumesCounters) != 1 {
			t.Fatalf("device %s: %+v", name, d)
		}
		var out []string
		for k, v := range d.ConsumesCounters[0].Counters {
			out = append(out, fmt.Sprintf("%s=%s", k, v.Value.String()))
		}
		slices.Sort(out)
		return out
	}
	if got, want := uses(MIGDeviceName(1, "3g.40gb", 4)), []string{"compute-slices=3", "memory-slice-4=1", "memory-slice-5=1", "memory-slice-6=1", "memory-slice-7=1"}; !slices.Equal(got, want) {
		t.Errorf("3g.40gb at 4 consumes %v, want %v", got, want)
	}
	if got := uses(MIGDeviceName(1, "1g.10gb+me", 2)); !slices.Contains(got, "media=1") {
		t.Errorf("1g.10gb+me consumes %v, want the media engines too", got)
	}
	st, ok := byName[MIGDeviceName(2, "3g.40gb", 4)]
	if !ok || len(st.ConsumesCounters) != 0 || *st.Attributes[AttrMIGUUID].StringValue != "MIG-b" || *st.Attributes[AttrUUID].StringValue != "GPU-static" {
		t.Errorf("static instance MIG-b: %+v", st)
	}
	for name := range byName {
		if strings.HasPrefix(name, DeviceName(0)+"-") {
			t.Errorf("GPU 0 is not in MIG mode, yet has MIG device %s", name)
		}
	}

	n.GPUs[1].Model = "L4"
	if _, _, err := MIGDevices(n, cat); err == nil || !strings.Contains(err.Error(), "GPU 1 (GPU-dynamic)") {
		t.Errorf("an L4 in MIG mode: %v, want an error naming GPU 1", err)
	}
}

// TestResourcesWithMIG: counter sets go in slices of their own, at most 8
// to a slice; devices at most 64 to a slice.
func TestResourcesWithMIG(t *testing.T) {
	n := &inventory.Node{Name: "big"}
	for i := range 9 {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: fmt.Sprintf("GPU-%d", i), Index: i, Model: "H100-SXM", MemoryMiB: 81559,
			NUMANode: -1, Health: inventory.Healthy, MIGMode: inventory.MIGEnabled, MIGManaged: true})
	}
	r, err := ResourcesWithMIG(n, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	var devs, sets []int
	for _, s := range r.Pools["big"].Slices {
		if len(s.Devices) > 0 && len(s.SharedCounters) > 0 {
			t.Fatal("a slice holds devices and counter sets")
		}
		if len(s.SharedCounters) > 0 {
			sets = append(sets, len(s.SharedCounters))
		} else {
			devs = append(devs, len(s.Devices))
		}
	}
	if !slices.Equal(sets, []int{8, 1}) || slices.Max(devs) > 64 {
		t.Errorf("counter sets per slice %v, devices per slice %v; want [8 1] and at most 64", sets, devs)
	}
}

// TestMIGRequests: a request of the MIG class is whole instances of the
// profile its selector names; one without a profile selector, with an
// unknown profile, with capacity or with a ShareConfig is refused naming
// the field.
func TestMIGRequests(t *testing.T) {
	cat := catalog.Default()
	claim := func(sels []resourceapi.DeviceSelector, count int64, capacity bool, config bool) *resourceapi.ResourceClaim {
		ex := &resourceapi.ExactDeviceRequest{DeviceClassName: ClassMIG, Selectors: sels, Count: count}
		if capacity {
			ex.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{CapacityMemory: resource.MustParse("1Gi")}}
		}
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: ex}}}}}
		if config {
			c.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: DriverName, Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"` + ConfigAPIVersion + `","kind":"` + ConfigKind + `","computeLimit":"0.5"}`)}}}}}
		}
		return c
	}
	reqs, other, err := Requests(claim([]resourceapi.DeviceSelector{MIGProfileSelector("3g.40gb")}, 2, false, false), cat)
	if err != nil || other || len(reqs) != 1 {
		t.Fatalf("3g.40gb x2: %+v %v %v", reqs, other, err)
	}
	if g := reqs[0].GPU; g.MIGProfile != "3g.40gb" || g.Count != 2 || g.ComputeMilli != request.Whole || g.Validate(cat) != nil {
		t.Errorf("3g.40gb x2 reads as %+v (valid: %v)", g, g.Validate(cat))
	}
	onWhole := claim([]resourceapi.DeviceSelector{MIGProfileSelector("1g.10gb")}, 1, false, false)
	onWhole.Spec.Devices.Requests[0].Exactly.DeviceClassName = ClassGPU
	for _, tc := range []struct {
		name string
		c    *resourceapi.ResourceClaim
		want string
	}{
		{"a MIG profile on the whole-GPU class", onWhole, `spec.devices.requests[0].selectors[0]: names a MIG profile, but gpu.tessera.io gives GPUs that are not in MIG mode`},
		{"no profile", claim(nil, 1, false, false), `spec.devices.requests[0].selectors: a request of mig.tessera.io must name its MIG profile with the selector device.attributes["gpu.tessera.io"].migProfile == "1g.10gb"`},
		{"unknown profile", claim([]resourceapi.DeviceSelector{MIGProfileSelector("5g.55gb")}, 1, false, false), `MIG profile "5g.55gb" is not a profile of any MIG-capable model; the catalog's profiles: 1g.`},
		{"two profiles", claim([]resourceapi.DeviceSelector{MIGProfileSelector("1g.10gb"), MIGProfileSelector("2g.20gb")}, 1, false, false), `selectors[1]: names a second MIG profile`},
		{"capacity", claim([]resourceapi.DeviceSelector{MIGProfileSelector("1g.10gb")}, 1, true, false), `spec.devices.requests[0].capacity: must be empty for mig.tessera.io`},
		{"burst", claim([]resourceapi.DeviceSelector{MIGProfileSelector("1g.10gb")}, 1, false, true), `configures no mig.tessera.io`},
	} {
		if _, _, err := Requests(tc.c, cat); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestMIGDevicesOnRealControlPlane: the MIG devices and counter sets are
// accepted by the real API server (v1.37, strict field validation, its
// default gates) as the resourceslice helper publishes them, and
// Kubernetes' structured allocator honours the counters: two 3g.40gb
// instances of the managed GPU fit, a third and a 1g.10gb beside them do
// not; the whole-GPU class takes GPU 0 and never a MIG device; the MIG
// class takes the static GPU's instances by profile.
func TestMIGDevicesOnRealControlPlane(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, false)
	client := kubernetes.NewForConfigOrDie(cfg)
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	installed := installClasses(ctx, t, client)
	n := migNode()
	res, err := ResourcesWithMIG(n, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	published := publishSlices(ctx, t, client, n.Name, res)
	var stored []resourceapi.Device
	counters := 0
	for _, s := range published {
		stored = append(stored, s.Spec.Devices...)
		counters += len(s.Spec.SharedCounters)
	}
	wantDevs := append(Devices(n), func() []resourceapi.Device { d, _, _ := MIGDevices(n, catalog.Default()); return d }()...)
	if len(stored) != len(wantDevs) || counters != 1 {
		t.Fatalf("stored %d devices and %d counter sets, want %d and 1", len(stored), counters, len(wantDevs))
	}
	for _, w := range wantDevs {
		i := slices.IndexFunc(stored, func(d resourceapi.Device) bool { return d.Name == w.Name })
		if i < 0 || !resourceslice.DevicesDeepEqual(stored[i:i+1], []resourceapi.Device{w}) {
			t.Errorf("device %s not stored as published (a field dropped by a gate that is off?)", w.Name)
		}
	}

	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	allocate := func(name, class string, sels ...resourceapi.DeviceSelector) string {
		t.Helper()
		claim, err := client.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Selectors: sels}}}}},
		}, strict)
		if err != nil {
			t.Fatalf("create claim %s: %v", name, err)
		}
		a, err := structured.NewAllocator(ctx, SchedulerFeatures(), state, installed, published, cel.NewCache(10, cel.Features{}))
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			t.Fatalf("allocate %s: %v", name, err)
		}
		if len(out) == 0 {
			return ""
		}
		r := out[0].Devices.Results[0]
		state.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		claim.Status.Allocation = &out[0]
		if _, err := client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("write allocation of %s: %v", name, err)
		}
		return r.Device
	}
	onDynamic := MIGDeviceName(1, "3g.40gb", 0)[:len(DeviceName(1))]
	forty := MIGProfileSelector("3g.40gb")
	dynamicGPU := resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["` + DriverName + `"].uuid == "GPU-dynamic"`}}
	a, b := allocate("forty-a", ClassMIG, forty, dynamicGPU), allocate("forty-b", ClassMIG, forty, dynamicGPU)
	if !strings.HasPrefix(a, onDynamic) || !strings.HasPrefix(b, onDynamic) || a == b {
		t.Fatalf("two 3g.40gb on the managed GPU: %q and %q", a, b)
	}
	if c := allocate("forty-c", ClassMIG, forty, dynamicGPU); c != "" {
		t.Errorf("a third 3g.40gb on the managed GPU got %s: the counters allow two", c)
	}
	if c := allocate("ten", ClassMIG, MIGProfileSelector("1g.10gb"), dynamicGPU); c != "" {
		t.Errorf("a 1g.10gb beside two 3g.40gb got %s: every memory slice is taken", c)
	}
	if w := allocate("whole", ClassGPU); w != DeviceName(0) {
		t.Errorf("the whole-GPU class took %q, want %s (never a MIG device)", w, DeviceName(0))
	}
	if w := allocate("whole-2", ClassGPU); w != "" {
		t.Errorf("a second whole GPU took %q: GPUs 1 and 2 are in MIG mode", w)
	}
	if s := allocate("static", ClassMIG, forty); s != MIGDeviceName(2, "3g.40gb", 0) && s != MIGDeviceName(2, "3g.40gb", 4) {
		t.Errorf("3g.40gb anywhere took %q, want an instance of the static GPU", s)
	}
}

// TestMIGShares: an allocation of a MIG device reads as its whole
// instance: on the managed GPU one to create at its start (the parent's
// UUID until created), on the static one the existing instance; without a
// catalog a managed GPU's MIG device is refused, and a device the GPU
// does not offer is an error naming it.
func TestMIGShares(t *testing.T) {
	cat := catalog.Default()
	n := migNode()
	claimOn := func(device string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: DriverName, Pool: n.Name, Device: device}}}}}}
	}
	m, _ := cat.Lookup("H100-SXM")
	mem := m.MIG.Profiles[m.MIG.ProfileIndex("3g.40gb")].MemoryMiB
	got, err := Shares(claimOn(MIGDeviceName(1, "3g.40gb", 4)), n, cat)
	// The profile's compute slices over the GPU's (3 of 7), as the
	// scheduler's annotation gives it (placement.MIGShare).
	c := int64(3) * request.Whole / int64(m.MIG.ComputeSlices)
	want := binding.Share{UUID: "GPU-dynamic", Index: 1, ComputeMilli: c, ComputeLimitMilli: c, MemoryMiB: mem, MemoryLimitMiB: mem,
		MIGProfile: "3g.40gb", MIG: &binding.MIGInstance{GPU: "GPU-dynamic", Start: 4, Create: true}}
	if err != nil || len(got) != 1 || got[0].MIG == nil || *got[0].MIG != *want.MIG {
		t.Fatalf("managed 3g.40gb@4: %+v, %v; want %+v", got, err, want)
	}
	got[0].MIG, want.MIG = nil, nil
	if got[0] != want {
		t.Errorf("managed 3g.40gb@4: %+v, want %+v", got[0], want)
	}
	got, err = Shares(claimOn(MIGDeviceName(2, "3g.40gb", 4)), n, cat)
	if err != nil || len(got) != 1 || got[0].UUID != "MIG-b" || got[0].MIG.Create || got[0].MIG.Start != 4 || got[0].MIG.GPU != "GPU-static" {
		t.Errorf("static instance MIG-b: %+v, %v", got, err)
	}
	// An existing instance: the profile's compute, its own memory as the
	// node reports it; without a catalog, a whole GPU's compute.
	if len(got) == 1 && (got[0].ComputeMilli != c || got[0].ComputeLimitMilli != c || got[0].MemoryMiB != 40192 || got[0].MemoryLimitMiB != 40192) {
		t.Errorf("static instance MIG-b: %+v, want compute %d and the instance's memory 40192", got[0], c)
	}
	if got, err := Shares(claimOn(MIGDeviceName(2, "3g.40gb", 4)), n, nil); err != nil || len(got) != 1 || got[0].ComputeMilli != request.Whole || got[0].MemoryMiB != 40192 {
		t.Errorf("static instance MIG-b, no catalog: %+v, %v; want a whole GPU's compute and memory 40192", got, err)
	}
	if _, err := Shares(claimOn(MIGDeviceName(1, "3g.40gb", 4)), n, nil); err == nil || !strings.Contains(err.Error(), "no catalog") {
		t.Errorf("no catalog: %v, want an error", err)
	}
	if _, err := Shares(claimOn(MIGDeviceName(1, "3g.40gb", 2)), n, cat); err == nil || !strings.Contains(err.Error(), "offers no MIG device gpu-1-mig-3g-40gb-2") {
		t.Errorf("3g.40gb at 2 (not a start of the profile): %v, want an error naming the device", err)
	}
}

// TestAllocatePinnedMIG: a MIG device the policy chose is allocated, and
// one whose memory slices a device another claim holds covers is refused
// (ErrNoFit): the allocator still counts the held device's counters though
// it only shows the chosen ones.
func TestAllocatePinnedMIG(t *testing.T) {
	n := migNode()
	res, err := ResourcesWithMIG(n, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	var sl []*resourceapi.ResourceSlice
	pool := res.Pools[n.Name]
	for i, s := range pool.Slices {
		sl = append(sl, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}, Spec: resourceapi.ResourceSliceSpec{
			Driver: DriverName, NodeName: &n.Name, Devices: s.Devices, SharedCounters: s.SharedCounters,
			Pool: resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}}})
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	state := NewAllocatedState(nil)
	allocate := func(name, profile, device string) error {
		c := claimFor(name, ClassMIG, nil, MIGProfileSelector(profile).CEL.Expression)
		_, err := Allocate(context.Background(), Pinned{Node: node, Inventory: n, Claims: []*resourceapi.ResourceClaim{c},
			Chosen: map[types.UID][]string{c.UID: {device}}, Slices: sl, Classes: classList(DeviceClasses("")), State: &state, Features: SchedulerFeatures()})
		return err
	}
	if err := allocate("four", "4g.40gb", MIGDeviceName(1, "4g.40gb", 0)); err != nil {
		t.Fatalf("4g.40gb at 0: %v", err)
	}
	if err := allocate("ten", "1g.10gb", MIGDeviceName(1, "1g.10gb", 2)); !errors.Is(err, ErrNoFit) {
		t.Errorf("1g.10gb at 2, inside the 4g.40gb at 0: %v, want ErrNoFit", err)
	}
	if err := allocate("ten-b", "1g.10gb", MIGDeviceName(1, "1g.10gb", 4)); err != nil {
		t.Errorf("1g.10gb at 4, beside the 4g.40gb: %v", err)
	}
}
