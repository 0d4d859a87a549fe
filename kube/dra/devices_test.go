package dra

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/inventory"
)

func node() *inventory.Node {
	return &inventory.Node{Name: "gpu-1", DriverVersion: "535.54.03", GPUs: []inventory.GPU{
		{UUID: "GPU-a", Index: 0, Model: "H200", Product: "NVIDIA H200", MemoryMiB: 143771, NUMANode: 1, PCIBusID: "00000000:19:00.0", ComputeCapability: "9.0", Health: inventory.Healthy},
		{UUID: "GPU-b", Index: 1, Model: "H200", Product: "NVIDIA H200", MemoryMiB: 143771, NUMANode: -1, Health: inventory.Healthy, Sharing: inventory.SharingExclusive},
		{UUID: "GPU-c", Index: 2, Model: "A100-40GB", MemoryMiB: 40960, MIGMode: inventory.MIGEnabled, Health: inventory.Healthy},
		{UUID: "GPU-d", Index: 3, Model: "H200", MemoryMiB: 143771, NUMANode: -1, Health: inventory.Unhealthy, Sharing: inventory.SharingMPS},
	}}
}

func TestDevices(t *testing.T) {
	devs := Devices(node())
	if len(devs) != 3 {
		t.Fatalf("got %d devices, want 3 (the MIG GPU left out)", len(devs))
	}
	shared, exclusive, sick := devs[0], devs[1], devs[2]
	if shared.Name != "gpu-0" || exclusive.Name != "gpu-1" || sick.Name != "gpu-3" {
		t.Errorf("names %s %s %s, want gpu-0 gpu-1 gpu-3", shared.Name, exclusive.Name, sick.Name)
	}
	a := shared.Attributes
	if *a[AttrUUID].StringValue != "GPU-a" || *a[AttrIndex].IntValue != 0 || *a[AttrModel].StringValue != "H200" ||
		*a[AttrNUMANode].IntValue != 1 || *a[AttrPCIBusID].StringValue != "00000000:19:00.0" ||
		*a[AttrDriverVersion].VersionValue != "535.54.3" || *a[AttrSharing].StringValue != "shared" || *a[AttrMemoryMiB].IntValue != 143771 {
		t.Errorf("shared GPU attributes wrong: %+v", a)
	}
	if _, ok := exclusive.Attributes[AttrNUMANode]; ok {
		t.Error("an unknown NUMA node is published")
	}
	if shared.AllowMultipleAllocations == nil || !*shared.AllowMultipleAllocations {
		t.Error("a shared GPU must allow multiple allocations")
	}
	if exclusive.AllowMultipleAllocations != nil {
		t.Error("an exclusive GPU must be allocated once")
	}
	if sick.AllowMultipleAllocations == nil || !*sick.AllowMultipleAllocations || *sick.Attributes[AttrSharing].StringValue != "mps" {
		t.Error("an MPS GPU takes shares")
	}
	c := shared.Capacity[CapacityCompute]
	if c.Value.Cmp(resource.MustParse("1")) != 0 || c.RequestPolicy == nil || c.RequestPolicy.Default.Cmp(c.Value) != 0 ||
		c.RequestPolicy.ValidRange.Step != nil || c.RequestPolicy.ValidRange.Min.MilliValue() != 1 {
		t.Errorf("compute capacity %+v, want 1 from 1m with no step (as asked, whatever DRAFractionalCapacityRange), default all", c)
	}
	m := shared.Capacity[CapacityMemory]
	if m.Value.Value() != 143771<<20 || !m.RequestPolicy.Default.IsZero() || !m.RequestPolicy.ValidRange.Min.IsZero() || m.RequestPolicy.ValidRange.Step.Value() != 1<<20 {
		t.Errorf("memory capacity %+v, want 143771Mi in steps of 1Mi from 0, default 0", m)
	}
	if exclusive.Capacity[CapacityCompute].RequestPolicy != nil {
		t.Error("an exclusive GPU has no request policy: it is taken whole")
	}
	if len(sick.Taints) != 1 || sick.Taints[0].Key != TaintUnhealthy || sick.Taints[0].Value != "Unhealthy" || sick.Taints[0].Effect != resourceapi.DeviceTaintEffectNoSchedule {
		t.Errorf("unhealthy GPU taints %+v", sick.Taints)
	}
	if len(shared.Taints) != 0 {
		t.Error("a healthy GPU is tainted")
	}
}

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{"535.54.03": "535.54.3", "570.133": "570.133.0", "570.133.20": "570.133.20", "": "", "r535": "", "1.2.3.4": "", "1.-2.3": ""} {
		got, ok := semver(in)
		if got != want || ok != (want != "") {
			t.Errorf("semver(%q) = %q, %v, want %q", in, got, ok, want)
		}
	}
}

func TestResourcesSplitsLargePools(t *testing.T) {
	n := &inventory.Node{Name: "big"}
	for i := range 130 {
		n.GPUs = append(n.GPUs, inventory.GPU{Index: i, UUID: "GPU-" + strings.Repeat("x", i%3), MemoryMiB: 1024, Health: inventory.Healthy})
	}
	r := Resources(n)
	pool, ok := r.Pools["big"]
	if !ok || len(r.Pools) != 1 {
		t.Fatalf("pools %v, want one named after the node", r.Pools)
	}
	var sizes []int
	for _, s := range pool.Slices {
		sizes = append(sizes, len(s.Devices))
	}
	if len(sizes) != 3 || sizes[0] != 64 || sizes[1] != 64 || sizes[2] != 2 {
		t.Errorf("slice sizes %v, want [64 64 2]", sizes)
	}
}

func TestDeviceClasses(t *testing.T) {
	cs := DeviceClasses("tessera.io/gpu")
	if len(cs) != 3 || cs[0].Name != ClassGPU || cs[1].Name != ClassSharedGPU || cs[2].Name != ClassMIG {
		t.Fatalf("classes %v", cs)
	}
	if cs[0].Spec.ExtendedResourceName == nil || *cs[0].Spec.ExtendedResourceName != "tessera.io/gpu" || cs[1].Spec.ExtendedResourceName != nil || cs[2].Spec.ExtendedResourceName != nil {
		t.Error("the extended resource maps to the whole-GPU class only")
	}
	if DeviceClasses("")[0].Spec.ExtendedResourceName != nil {
		t.Error("no extended resource asked, one mapped")
	}
}
