package dra

import (
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/inventory"
)

// DriverName is Tessera's DRA driver: the domain of its attributes and
// capacities, the name its kubelet plugin registers and its slices carry.
const DriverName = "gpu.tessera.io"

// Capacities of a GPU device, consumed by each share allocated on it.
const (
	// CapacityCompute is the GPU's compute, 1 per GPU; a share asks a part
	// of it in thousandths (0.25 or 250m).
	CapacityCompute resourceapi.QualifiedName = "compute"
	// CapacityMemory is the GPU's memory; a share asks a part of it in
	// MiB steps (20Gi).
	CapacityMemory resourceapi.QualifiedName = "memory"
)

// Attributes of a GPU device (in the driver's domain: a selector reads
// device.attributes["gpu.tessera.io"].model).
const (
	AttrUUID              resourceapi.QualifiedName = "uuid"              // string, "GPU-..."
	AttrIndex             resourceapi.QualifiedName = "index"             // int, the driver's index
	AttrModel             resourceapi.QualifiedName = "model"             // string, the catalog's canonical name ("H200")
	AttrProduct           resourceapi.QualifiedName = "product"           // string, as the device reports it ("NVIDIA H200")
	AttrMemoryMiB         resourceapi.QualifiedName = "memoryMiB"         // int, the GPU's memory
	AttrNUMANode          resourceapi.QualifiedName = "numaNode"          // int, only when known
	AttrPCIBusID          resourceapi.QualifiedName = "pciBusID"          // string, only when known
	AttrComputeCapability resourceapi.QualifiedName = "computeCapability" // string ("9.0"), only when known
	AttrDriverVersion     resourceapi.QualifiedName = "driverVersion"     // version, the driver's with leading zeros dropped
	AttrSharing           resourceapi.QualifiedName = "sharing"           // string: shared, mps or exclusive
)

// TaintUnhealthy is the device taint (NoSchedule) on a GPU whose health is
// not Healthy; its value is the health (Unhealthy, Unknown).
const TaintUnhealthy = DriverName + "/unhealthy"

// maxDevicesPerSlice is how many devices go in one ResourceSlice: the API's
// limit for slices with taints (128 without).
const maxDevicesPerSlice = 64

// DeviceName names the device of the GPU with driver index i.
func DeviceName(i int) string { return "gpu-" + strconv.Itoa(i) }

// Devices returns n's GPUs as devices, in the inventory's order. A GPU in
// MIG mode is left out: it takes MIG requests only, which this model does
// not publish yet (docs/dra.md).
//
// A shared GPU (sharing shared or mps) allows multiple allocations, each
// consuming a part of its compute (1 per GPU, from 1m up, no step) and of its
// memory (in steps of 1Mi). A request that names no compute consumes all
// of it, so a claim for a device with nothing more is a whole GPU, as
// nvidia.com/gpu: 1 is. A request that names no memory consumes none by
// DRA's policy: Tessera's scheduler books memory in proportion to compute
// for it and writes that in the allocation's consumedCapacity (Share;
// docs/dra.md). An exclusive GPU is allocated whole, once.
func Devices(n *inventory.Node) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, len(n.GPUs))
	driver, driverOK := semver(n.DriverVersion)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIGMode == inventory.MIGEnabled {
			continue
		}
		d := resourceapi.Device{
			Name: DeviceName(g.Index),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				AttrUUID:      {StringValue: ptr(g.UUID)},
				AttrIndex:     {IntValue: ptr(int64(g.Index))},
				AttrModel:     {StringValue: ptr(g.Model)},
				AttrProduct:   {StringValue: ptr(g.Product)},
				AttrMemoryMiB: {IntValue: ptr(g.MemoryMiB)},
				AttrSharing:   {StringValue: ptr(sharing(g.Sharing))},
			},
		}
		if g.NUMANode >= 0 {
			d.Attributes[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr(int64(g.NUMANode))}
		}
		if g.PCIBusID != "" {
			d.Attributes[AttrPCIBusID] = resourceapi.DeviceAttribute{StringValue: ptr(g.PCIBusID)}
		}
		if g.ComputeCapability != "" {
			d.Attributes[AttrComputeCapability] = resourceapi.DeviceAttribute{StringValue: ptr(g.ComputeCapability)}
		}
		if driverOK {
			d.Attributes[AttrDriverVersion] = resourceapi.DeviceAttribute{VersionValue: ptr(driver)}
		}
		compute := resource.MustParse("1")
		memory := *resource.NewQuantity(g.MemoryMiB*mib, resource.BinarySI)
		d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityCompute: {Value: compute},
			CapacityMemory:  {Value: memory},
		}
		if inventory.AllowsFractions(g.Sharing) {
			d.AllowMultipleAllocations = ptr(true)
			d.Capacity[CapacityCompute] = resourceapi.DeviceCapacity{Value: compute, RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default: ptr(compute.DeepCopy()),
				// No step: a step of 1m needs the DRAFractionalCapacityRange
				// gate, off in kube-scheduler v1.37 by default, without which
				// the allocator rounds 0.5 up to 1 (the whole GPU). Without a
				// step the share is consumed as asked; Tessera refuses one
				// finer than 1m when it reads the claim (Share).
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr(resource.MustParse("1m")), Max: ptr(compute.DeepCopy())},
			}}
			d.Capacity[CapacityMemory] = resourceapi.DeviceCapacity{Value: memory, RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr(resource.MustParse("0")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr(resource.MustParse("0")), Max: ptr(memory.DeepCopy()), Step: ptr(resource.MustParse("1Mi"))},
			}}
		}
		d.Taints = healthTaints(g)
		out = append(out, d)
	}
	return out
}

// healthTaints taints the devices of a GPU whose health is not Healthy
// (NoSchedule, valued with the health); none for a healthy one.
func healthTaints(g *inventory.GPU) []resourceapi.DeviceTaint {
	if g.Health == inventory.Healthy {
		return nil
	}
	health := string(g.Health)
	if health == "" {
		health = "Unknown"
	}
	return []resourceapi.DeviceTaint{{Key: TaintUnhealthy, Value: health, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
}

// Resources is n's pool (named after the node) for the resourceslice
// helper, which writes and updates its ResourceSlices (owned by the node:
// NodeOwner).
func Resources(n *inventory.Node) *resourceslice.DriverResources {
	return pool(n.Name, Devices(n), nil)
}

// pool is a node's pool of devs, in slices of at most maxDevicesPerSlice
// devices, and of counter sets in slices of their own (a slice holds
// devices or counter sets, at most ResourceSliceMaxCounterSets of them).
func pool(node string, devs []resourceapi.Device, sets []resourceapi.CounterSet) *resourceslice.DriverResources {
	var out []resourceslice.Slice
	for len(devs) > maxDevicesPerSlice {
		out = append(out, resourceslice.Slice{Devices: devs[:maxDevicesPerSlice]})
		devs = devs[maxDevicesPerSlice:]
	}
	out = append(out, resourceslice.Slice{Devices: devs})
	for len(sets) > 0 {
		k := min(len(sets), resourceapi.ResourceSliceMaxCounterSets)
		out = append(out, resourceslice.Slice{SharedCounters: sets[:k]})
		sets = sets[k:]
	}
	return &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: {Slices: out}}}
}

// NodeOwner is the owner of a node's ResourceSlices: the Node, so that
// the slices name the node (spec.nodeName) and go when it goes.
func NodeOwner(node string) *resourceslice.Owner {
	return &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: node}
}

const mib = 1 << 20

// sharing is the sharing attribute of a GPU with inventory sharing s.
func sharing(s string) string {
	if s == "" {
		return inventory.SharingShared
	}
	return s
}

// semver turns a driver version ("535.54.03", "570.133") into the semantic
// version a version attribute needs ("535.54.3", "570.133.0"): leading
// zeros dropped, a missing patch is 0. ok is false for anything else.
func semver(v string) (string, bool) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return "", false
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return "", false
		}
		parts[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(parts, "."), true
}

func ptr[T any](v T) *T { return &v }
