package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeviceClasses Tessera installs.
const (
	// ClassGPU selects any of Tessera's GPUs. A request of this class that
	// names no capacity takes a whole GPU; with capacity (compute,
	// memory) it takes a share of a shared GPU.
	ClassGPU = "gpu.tessera.io"
	// ClassSharedGPU selects only GPUs that take shares (sharing shared
	// or mps), for claims that must share.
	ClassSharedGPU = "shared-gpu.tessera.io"
)

// mine selects Tessera's devices; whole selects its GPUs, not their MIG
// instances (mig.go), which have the migProfile attribute.
var (
	mineExpr  = `device.driver == "` + DriverName + `"`
	wholeExpr = `!has(device.attributes["` + DriverName + `"].` + string(AttrMIGProfile) + `)`
	migExpr   = `has(device.attributes["` + DriverName + `"].` + string(AttrMIGProfile) + `)`
)

// DeviceClasses returns Tessera's DeviceClasses. extendedResource, when
// not empty, maps that extended resource to ClassGPU
// (spec.extendedResourceName): on nodes whose devices are published
// through DRA, a pod asking for N of it gets a claim for N whole GPUs made
// for it, while nodes that run the device plugin keep serving the
// resource as before.
func DeviceClasses(extendedResource string) []resourceapi.DeviceClass {
	sel := func(expr string) resourceapi.DeviceSelector {
		return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}
	}
	mine, whole, mig := sel(mineExpr), sel(wholeExpr), sel(migExpr)
	shared := sel(`device.attributes["` + DriverName + `"].` + string(AttrSharing) + ` != "exclusive"`)
	gpu := resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassGPU},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{mine, whole}},
	}
	if extendedResource != "" {
		gpu.Spec.ExtendedResourceName = ptr(extendedResource)
	}
	return []resourceapi.DeviceClass{gpu, {
		ObjectMeta: metav1.ObjectMeta{Name: ClassSharedGPU},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{mine, shared}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: ClassMIG},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{mine, mig}},
	}}
}
