package dra

import (
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/request"
)

func exact(name, class string, count int64, capacity map[resourceapi.QualifiedName]resource.Quantity) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	if capacity != nil {
		r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
	}
	return r
}

func claimOf(reqs []resourceapi.DeviceRequest, configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Config: configs}}}
}

func claimConfig(requests []string, params string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: resourceapi.DeviceConfiguration{
		Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: DriverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

func TestRequests(t *testing.T) {
	burst := `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.8"}`
	cat := catalog.Default()
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  []ClaimRequest
		other bool
	}{
		{"whole GPUs", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 2, nil)}),
			[]ClaimRequest{{Name: "gpu", GPU: request.GPU{Count: 2, ComputeMilli: 1000, ComputeLimitMilli: 1000}}}, false},
		{"a share with burst, configured by name", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassSharedGPU, 1, compute("0.25"))},
			claimConfig([]string{"gpu"}, burst)),
			[]ClaimRequest{{Name: "gpu", GPU: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 800}, SharedOnly: true}}, false},
		{"configuration for every request", claimOf([]resourceapi.DeviceRequest{exact("a", ClassGPU, 1, compute("0.5")), exact("b", ClassGPU, 1, compute("0.5"))},
			claimConfig(nil, burst)),
			[]ClaimRequest{{Name: "a", GPU: request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 800}},
				{Name: "b", GPU: request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 800}}}, false},
		{"another driver beside", claimOf([]resourceapi.DeviceRequest{exact("nic", "nic.example.com", 1, nil), exact("gpu", ClassGPU, 1, nil)}),
			[]ClaimRequest{{Name: "gpu", GPU: request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000}}}, true},
		{"first available: Tessera's subrequest", claimOf([]resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "other", DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			{Name: "share", DeviceClassName: ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Capacity: &resourceapi.CapacityRequirements{Requests: compute("0.3")}}}}}, claimConfig([]string{"gpu"}, burst)),
			[]ClaimRequest{{Name: "gpu/share", GPU: request.GPU{Count: 1, ComputeMilli: 300, ComputeLimitMilli: 800}}}, false},
		{"admin access takes nothing", claimOf([]resourceapi.DeviceRequest{{Name: "mon", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, AdminAccess: ptr(true)}}}),
			nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, other, err := Requests(tc.claim, cat)
			if err != nil {
				t.Fatal(err)
			}
			if other != tc.other || len(got) != len(tc.want) {
				t.Fatalf("got %+v (other %v), want %+v (other %v)", got, other, tc.want, tc.other)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("request %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRequestsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{"all devices", claimOf([]resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: ClassGPU,
			AllocationMode: resourceapi.DeviceAllocationModeAll}}}), "spec.devices.requests[0].allocationMode: must be ExactCount"},
		{"several shares in one request", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 2, compute("0.5"))}),
			"spec.devices.requests[0].count: must be 1 for a request with capacity"},
		{"a share finer than 1m", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 1, compute("0.0005"))}), "capacity.requests.compute: must be a share in (0, 1], written 0.25, 25% or 250m, at most a thousandth fine, got \"500u\""},
		{"too many GPUs", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 1000, nil)}), "spec.devices.requests[0].count: must be in [1, "},
		{"an unknown capacity", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 1,
			map[resourceapi.QualifiedName]resource.Quantity{"cores": resource.MustParse("1")})}), `unknown capacity "cores"`},
		{"a burst under the guarantee", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 1, compute("0.5"))},
			claimConfig([]string{"gpu"}, `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.25"}`)),
			"computeLimit: must be in [0.5, 1]"},
		{"a bad configuration", claimOf([]resourceapi.DeviceRequest{exact("gpu", ClassGPU, 1, nil)},
			claimConfig(nil, `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","burst":"1"}`)),
			`spec.devices.config[0]: spec.devices.config[].opaque.parameters (driver gpu.tessera.io): json: unknown field "burst"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Requests(tc.claim, catalog.Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "claim ml/c") {
				t.Errorf("got %v, want an error naming claim ml/c and containing %q", err, tc.want)
			}
		})
	}
}
