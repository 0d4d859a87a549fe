package dra

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/binding"
)

func allocated(results []resourceapi.DeviceRequestAllocationResult, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results, Config: configs}}},
	}
}

func opaque(source resourceapi.AllocationConfigSource, requests []string, params string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: source, Requests: requests, DeviceConfiguration: resourceapi.DeviceConfiguration{
		Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: DriverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

func TestShares(t *testing.T) {
	n := node() // gpu-0 shared H200, gpu-1 exclusive H200, gpu-3 MPS
	share := types.UID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	half := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: DriverName, Pool: "gpu-1", Device: "gpu-0", ShareID: &share,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse("500m"), CapacityMemory: resource.MustParse("0")}}
	whole := resourceapi.DeviceRequestAllocationResult{Request: "big", Driver: DriverName, Pool: "gpu-1", Device: "gpu-1"}
	other := resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "gpu-1", Device: "eth0"}
	burst := `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.8","memoryLimit":"100Gi"}`
	classCfg := `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.6"}`
	got, err := Shares(allocated([]resourceapi.DeviceRequestAllocationResult{other, half, whole},
		opaque(resourceapi.AllocationConfigSourceClass, []string{"gpu"}, classCfg),
		opaque(resourceapi.AllocationConfigSourceClaim, []string{"gpu"}, burst)), n, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Half of an H200 (143771 MiB): memory follows compute, 71885 MiB;
	// the claim's config (last) overrides the class's for request gpu; the
	// whole GPU (request big) has none.
	want := []binding.Share{
		{UUID: "GPU-a", Index: 0, ComputeMilli: 500, ComputeLimitMilli: 800, MemoryMiB: 71885, MemoryLimitMiB: 102400},
		{UUID: "GPU-b", Index: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 143771, MemoryLimitMiB: 143771},
	}
	if len(got) != len(want) {
		t.Fatalf("shares %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("share %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The class's config names the whole GPU's limit 0.6 below its 1: refused.
	if _, err := Shares(allocated([]resourceapi.DeviceRequestAllocationResult{whole},
		opaque(resourceapi.AllocationConfigSourceClass, []string{"big"}, classCfg)), n, nil); err == nil || !strings.Contains(err.Error(), "computeLimit") {
		t.Errorf("a limit below a whole GPU: error %v", err)
	}
}

func TestSharesRefuses(t *testing.T) {
	ok := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: DriverName, Pool: "gpu-1", Device: "gpu-0"}
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{"not allocated", &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"}}, "claim ml/c: not allocated"},
		{"another node's", allocated([]resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: DriverName, Pool: "other", Device: "gpu-0"}}), "of pool other, not of this node gpu-1"},
		{"no such device", allocated([]resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: DriverName, Pool: "gpu-1", Device: "gpu-9"}}), "has no device gpu-9"},
		{"none of ours", allocated([]resourceapi.DeviceRequestAllocationResult{{Request: "nic", Driver: "nic.example.com", Pool: "gpu-1", Device: "eth0"}}), "allocates no device of gpu.tessera.io"},
		{"bad config", allocated([]resourceapi.DeviceRequestAllocationResult{ok}, opaque(resourceapi.AllocationConfigSourceClaim, nil, `{"kind":"Other"}`)), "config[0] (FromClaim)"},
		{"unknown capacity", allocated([]resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: DriverName, Pool: "gpu-1", Device: "gpu-0",
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"cores": resource.MustParse("2")}}}), `unknown capacity "cores"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Shares(tc.claim, node(), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestConfigForSubrequests(t *testing.T) {
	cfg := `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.9"}`
	configs := []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, []string{"gpu"}, cfg)}
	if c, err := configFor(configs, "gpu/share"); err != nil || c == nil || c.ComputeLimit != "0.9" {
		t.Errorf("a firstAvailable subrequest: %+v, %v; want its request's config", c, err)
	}
	if c, err := configFor(configs, "other"); err != nil || c != nil {
		t.Errorf("another request: %+v, %v; want none", c, err)
	}
}
