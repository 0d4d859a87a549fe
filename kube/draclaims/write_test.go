package draclaims

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// TestSameDevices: a join checks the claim's allocation holds the devices
// it was planned with, in any order.
func TestSameDevices(t *testing.T) {
	res := func(devs ...string) *resourceapi.AllocationResult {
		a := &resourceapi.AllocationResult{}
		for _, d := range devs {
			pool, dev, _ := strings.Cut(d, "/")
			a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: kdra.DriverName, Pool: pool, Device: dev})
		}
		return a
	}
	for _, tc := range []struct {
		a, b *resourceapi.AllocationResult
		want bool
	}{
		{res("n1/gpu-0", "n1/gpu-1"), res("n1/gpu-1", "n1/gpu-0"), true},
		{res("n1/gpu-0"), res("n2/gpu-0"), false},
		{res("n1/gpu-0"), res("n1/gpu-0", "n1/gpu-1"), false},
		{res("n1/gpu-0"), nil, false},
		{nil, nil, true},
	} {
		if got := sameDevices(tc.a, tc.b); got != tc.want {
			t.Errorf("sameDevices(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
