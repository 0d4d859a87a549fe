package draclaims

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// shareClaim is a claim of one share of a Tessera GPU: compute and memory
// requested, and a burst limit for compute when limit is not empty.
func shareClaim(name, compute, memory, limit string) *resourceapi.ResourceClaim {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassSharedGPU, Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			kdra.CapacityCompute: resource.MustParse(compute), kdra.CapacityMemory: resource.MustParse(memory)}}}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}}
	if limit != "" {
		raw := fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q,"computeLimit":%q}`, kdra.ConfigAPIVersion, kdra.ConfigKind, limit)
		spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: kdra.DriverName, Parameters: runtime.RawExtension{Raw: raw}}}}}
	}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec}
}

// TestAssumedClaimsLayerPerPod: what each binding assumes of a shared
// claim is given back on its own: a failed join keeps the allocation
// another pod's binding writes, and the join waits for that write.
func TestAssumedClaimsLayerPerPod(t *testing.T) {
	al := New(Config{})
	base := shareClaim("shared", "0.5", "10Gi", "")
	base.UID, base.ResourceVersion = "claim-uid", "7"
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "a-uid"}}
	b := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", UID: "b-uid"}}
	alloc := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: kdra.DriverName, Pool: "gpu-0", Device: "gpu-1"}}}}
	reserved := func(c *resourceapi.ResourceClaim) []string {
		var out []string
		for _, r := range c.Status.ReservedFor {
			out = append(out, r.Name)
		}
		return out
	}

	if got := al.view(base); got != base {
		t.Fatalf("nothing assumed: view gave %+v, want the claim itself", got.Status)
	}
	wa := []Write{{claim: base, alloc: alloc, written: make(chan struct{})}}
	al.Assume(a, wa)
	v := al.view(base)
	if v.Status.Allocation == nil || !slices.Equal(reserved(v), []string{"a"}) {
		t.Fatalf("after a allocates: allocation %v, reservedFor %v; want allocated, [a]", v.Status.Allocation != nil, reserved(v))
	}
	if base.Status.Allocation != nil || len(base.Status.ReservedFor) != 0 {
		t.Fatal("Assume changed the informer's claim")
	}
	jb := al.join(v)
	if jb.wait != wa[0].written || jb.alloc != nil {
		t.Fatalf("b's join: wait %v alloc %v; want a's written channel and no allocation", jb.wait, jb.alloc)
	}
	al.Assume(b, []Write{jb})
	if v := al.view(base); !slices.Equal(reserved(v), []string{"a", "b"}) {
		t.Fatalf("after b joins: reservedFor %v, want [a b]", reserved(v))
	}
	al.Forget(b, []Write{jb})
	if v := al.view(base); v.Status.Allocation == nil || !slices.Equal(reserved(v), []string{"a"}) {
		t.Fatalf("after b's join fails: allocated %v, reservedFor %v; want a's allocation kept, [a]", v.Status.Allocation != nil, reserved(v))
	}
	al.Forget(a, wa)
	if got := al.view(base); got != base || len(al.assumed) != 0 {
		t.Fatalf("after a's binding fails too: %d claims assumed, want none", len(al.assumed))
	}

	// While a's writes are in flight, a newer informer version (its
	// finalizer written, not yet its allocation) takes the assumption
	// over; once a wrote version 9, version 8 still shows the
	// assumption, and version 9 replaces it.
	al.Assume(a, wa)
	version := func(rv string, allocated bool) *resourceapi.ResourceClaim {
		c := base.DeepCopy()
		c.ResourceVersion, c.Finalizers = rv, []string{resourceapi.Finalizer}
		if allocated {
			c.Status.Allocation, c.Status.ReservedFor = alloc, []resourceapi.ResourceClaimConsumerReference{consumerOf(a)}
		}
		return c
	}
	out := al.lay([]*resourceapi.ResourceClaim{version("8", false)}, true)
	if out[0].Status.Allocation == nil || out[0].ResourceVersion != "8" || al.view(version("8", false)).Status.Allocation == nil {
		t.Fatalf("informer version 8 while a's writes are in flight: allocated %v (version %s), want the assumption on version 8", out[0].Status.Allocation != nil, out[0].ResourceVersion)
	}
	al.Wrote(Written{Claim: base.UID, Pod: a.UID, Version: "9"})
	if out := al.lay([]*resourceapi.ResourceClaim{version("8", false)}, true); out[0].Status.Allocation == nil {
		t.Fatal("informer version 8 after a wrote version 9: the assumption was dropped too early")
	}
	v9 := version("9", true)
	if out := al.lay([]*resourceapi.ResourceClaim{v9}, true); out[0] != v9 || len(al.assumed) != 0 {
		t.Fatalf("informer version 9: got version %s and %d claims assumed, want it and none", out[0].ResourceVersion, len(al.assumed))
	}
	// A claim gone from the informer takes its assumption with it.
	al.Assume(a, wa)
	if al.lay(nil, true); len(al.assumed) != 0 {
		t.Fatalf("claim gone: %d claims still assumed", len(al.assumed))
	}
}
