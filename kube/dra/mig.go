package dra

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
)

// MIG instances as DRA devices (partitionable devices, beta and on in
// Kubernetes v1.37: DRAPartitionableDevices).
//
// A GPU in MIG mode whose layout Tessera manages (dynamic MIG) is
// published as one device per profile and start slot its model offers
// (catalog.MIGSpec), each consuming counters of the GPU's counter set:
// one per memory slice it covers, its compute slices, and the media
// engines for a +me profile. The counter set holds what the GPU has (one
// of each memory slice, its compute slices, one set of media engines), so
// the structured allocator never allocates two instances that overlap or
// that together take more than the GPU: the same rules as `nvidia-smi mig
// -lgipp` and the engine's MIG placement (catalog.MIGSpec.Fits). A GPU in
// MIG mode that Tessera does not manage (static MIG) is published as its
// existing instances, one device each, with nothing to share.
//
// A MIG device is not a whole GPU and takes no shares: ClassGPU and
// ClassSharedGPU leave it out (it has the migProfile attribute, and its
// sharing is exclusive); ClassMIG selects only MIG devices, and a request
// of it names its profile with a selector (MIGProfileSelector).

// ClassMIG selects Tessera's MIG devices.
const ClassMIG = "mig.tessera.io"

// Attributes of a MIG device, besides the GPU's uuid, index, model and
// product (the parent GPU's) and memoryMiB (the instance's).
const (
	AttrMIGProfile resourceapi.QualifiedName = "migProfile" // string, as nvidia-smi names it ("1g.10gb")
	AttrMIGStart   resourceapi.QualifiedName = "migStart"   // int, the first memory slice
	AttrMIGUUID    resourceapi.QualifiedName = "migUUID"    // string, an existing instance's ("MIG-..."), static MIG only
)

// Counters of a MIG GPU's counter set (CounterSetName).
const (
	// CounterComputeSlices is the GPU's compute slices (7 on an H100).
	CounterComputeSlices = "compute-slices"
	// CounterMedia is the GPU's one set of media engines, which a +me
	// profile takes.
	CounterMedia = "media"
)

// CounterMemorySlice names the counter of memory slice k.
func CounterMemorySlice(k int) string { return "memory-slice-" + strconv.Itoa(k) }

// CounterSetName names the counter set of the GPU with driver index i.
func CounterSetName(i int) string { return DeviceName(i) + "-mig" }

// MIGDeviceName names the MIG device of profile at start on the GPU with
// driver index i ("gpu-0-mig-1g-10gb-me-0": a DNS label).
func MIGDeviceName(i int, profile string, start int) string {
	p := strings.NewReplacer(".", "-", "+", "-").Replace(strings.ToLower(profile))
	return fmt.Sprintf("%s-mig-%s-%d", DeviceName(i), p, start)
}

// MIGDevices returns the MIG devices of n's GPUs in MIG mode, and the
// counter sets of those Tessera manages, in the inventory's order. A GPU
// whose model the catalog does not know or offers no MIG profiles for
// is an error: its instances cannot be described.
func MIGDevices(n *inventory.Node, cat *catalog.Catalog) ([]resourceapi.Device, []resourceapi.CounterSet, error) {
	var devs []resourceapi.Device
	var sets []resourceapi.CounterSet
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIGMode != inventory.MIGEnabled {
			continue
		}
		m, ok := cat.Lookup(g.Model)
		if !ok || !m.SupportsMIG() {
			return nil, nil, fmt.Errorf("GPU %d (%s): MIG mode is on but the catalog has no MIG profiles for model %q", g.Index, g.UUID, g.Model)
		}
		spec := m.MIG
		if !g.MIGManaged {
			for k, in := range g.MIGInstances {
				d := migDevice(g, instanceDeviceName(g, k), in.Profile, in.MemoryMiB)
				if in.Start != nil {
					d.Attributes[AttrMIGStart] = resourceapi.DeviceAttribute{IntValue: ptr(int64(*in.Start))}
				}
				if in.UUID != "" {
					d.Attributes[AttrMIGUUID] = resourceapi.DeviceAttribute{StringValue: ptr(in.UUID)}
				}
				devs = append(devs, d)
			}
			continue
		}
		set := resourceapi.CounterSet{Name: CounterSetName(g.Index), Counters: map[string]resourceapi.Counter{
			CounterComputeSlices: {Value: *resource.NewQuantity(int64(spec.ComputeSlices), resource.DecimalSI)},
			CounterMedia:         {Value: resource.MustParse("1")},
		}}
		for k := range spec.MemorySlices {
			set.Counters[CounterMemorySlice(k)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		sets = append(sets, set)
		for _, p := range spec.Profiles {
			for _, start := range p.Starts {
				d := migDevice(g, MIGDeviceName(g.Index, p.Name, start), p.Name, p.MemoryMiB)
				d.Attributes[AttrMIGStart] = resourceapi.DeviceAttribute{IntValue: ptr(int64(start))}
				use := map[string]resourceapi.Counter{
					CounterComputeSlices: {Value: *resource.NewQuantity(int64(p.ComputeSlices), resource.DecimalSI)},
				}
				for k := start; k < start+p.MemorySlices; k++ {
					use[CounterMemorySlice(k)] = resourceapi.Counter{Value: resource.MustParse("1")}
				}
				if p.MediaExtended() {
					use[CounterMedia] = resourceapi.Counter{Value: resource.MustParse("1")}
				}
				d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: use}}
				devs = append(devs, d)
			}
		}
	}
	return devs, sets, nil
}

// instanceDeviceName names the device of existing instance k of static
// MIG GPU g: by profile and start (MIGDeviceName), or by its position when
// the node did not read its start.
func instanceDeviceName(g *inventory.GPU, k int) string {
	in := g.MIGInstances[k]
	if in.Start == nil {
		return fmt.Sprintf("%s-mig-instance-%d", DeviceName(g.Index), k)
	}
	return MIGDeviceName(g.Index, in.Profile, *in.Start)
}

// migDevice is a MIG device's common part: the parent GPU's attributes,
// the profile and the instance's memory; exclusive, tainted as its GPU.
func migDevice(g *inventory.GPU, name, profile string, memoryMiB int64) resourceapi.Device {
	d := resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrUUID:       {StringValue: ptr(g.UUID)},
			AttrIndex:      {IntValue: ptr(int64(g.Index))},
			AttrModel:      {StringValue: ptr(g.Model)},
			AttrProduct:    {StringValue: ptr(g.Product)},
			AttrMemoryMiB:  {IntValue: ptr(memoryMiB)},
			AttrSharing:    {StringValue: ptr(inventory.SharingExclusive)},
			AttrMIGProfile: {StringValue: ptr(profile)},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityMemory: {Value: *resource.NewQuantity(memoryMiB*mib, resource.BinarySI)},
		},
	}
	if g.NUMANode >= 0 {
		d.Attributes[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr(int64(g.NUMANode))}
	}
	d.Taints = healthTaints(g)
	return d
}

// ResourcesWithMIG is Resources with n's MIG devices (MIGDevices): the
// GPUs' devices and the MIG devices in slices of at most 64, and the
// counter sets in slices of their own (a slice holds devices or counter
// sets, at most 8 of them).
func ResourcesWithMIG(n *inventory.Node, cat *catalog.Catalog) (*resourceslice.DriverResources, error) {
	mig, sets, err := MIGDevices(n, cat)
	if err != nil {
		return nil, err
	}
	return pool(n.Name, append(Devices(n), mig...), sets), nil
}

// MIGProfileSelector is the selector a request of ClassMIG names its
// profile with.
func MIGProfileSelector(profile string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf(`device.attributes[%q].%s == %q`, DriverName, AttrMIGProfile, profile)}}
}

// profileExpr matches MIGProfileSelector's expression (spaces aside).
var profileExpr = regexp.MustCompile(`^device\.attributes\["` + regexp.QuoteMeta(DriverName) + `"\]\.` + string(AttrMIGProfile) + `\s*==\s*"([^"]+)"$`)

// namesMIGProfile reports whether a selector reads the migProfile
// attribute (only MIG devices have it), and which.
func namesMIGProfile(sels []resourceapi.DeviceSelector) (int, bool) {
	for i, s := range sels {
		if s.CEL != nil && strings.Contains(s.CEL.Expression, string(AttrMIGProfile)) {
			return i, true
		}
	}
	return 0, false
}

// migProfileOf reads the profile a request of ClassMIG names: exactly one
// of its selectors must be MIGProfileSelector's, for a profile of a model
// in the catalog. path is the request's field path, for errors.
func migProfileOf(sels []resourceapi.DeviceSelector, cat *catalog.Catalog, path string) (string, error) {
	var profile string
	for i, s := range sels {
		if s.CEL == nil {
			continue
		}
		m := profileExpr.FindStringSubmatch(strings.TrimSpace(s.CEL.Expression))
		if m == nil {
			continue
		}
		if profile != "" {
			return "", fmt.Errorf("%s.selectors[%d]: names a second MIG profile (%q after %q); a request takes one instance of one profile", path, i, m[1], profile)
		}
		profile = m[1]
	}
	if profile == "" {
		return "", fmt.Errorf("%s.selectors: a request of %s must name its MIG profile with the selector %s", path, ClassMIG, MIGProfileSelector("1g.10gb").CEL.Expression)
	}
	var known []string
	for _, m := range cat.Models() {
		if m.MIG.ProfileIndex(profile) >= 0 {
			return profile, nil
		}
		for _, n := range m.MIG.ProfileNames() {
			if !slices.Contains(known, n) {
				known = append(known, n)
			}
		}
	}
	slices.Sort(known)
	return "", fmt.Errorf("%s.selectors: MIG profile %q is not a profile of any MIG-capable model; the catalog's profiles: %s", path, profile, strings.Join(known, ", "))
}

// migShare reads device, when it is a MIG device of one of n's GPUs in
// MIG mode (ok), as the whole instance it stands for (placement.MIGShare:
// the profile's compute slices and memory, an existing instance's own
// memory where the node reports it).
func migShare(n *inventory.Node, device string, cat *catalog.Catalog) (sh binding.Share, ok bool, err error) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIGMode != inventory.MIGEnabled || !strings.HasPrefix(device, DeviceName(g.Index)+"-mig-") {
			continue
		}
		if !g.MIGManaged {
			for k, in := range g.MIGInstances {
				start := -1
				if in.Start != nil {
					start = *in.Start
				}
				if instanceDeviceName(g, k) == device {
					return placement.MIGShare(placement.MIGSpecOf(cat, g.Model), g, placement.MIGChoice{UUID: in.UUID, Start: start}, in.Profile), true, nil
				}
			}
			return binding.Share{}, false, fmt.Errorf("GPU %d (%s) has no MIG instance %s (the operator's layout changed?)", g.Index, g.UUID, device)
		}
		if cat == nil {
			return binding.Share{}, false, fmt.Errorf("MIG device %s: no catalog to read its profile from", device)
		}
		spec := placement.MIGSpecOf(cat, g.Model)
		if spec == nil {
			return binding.Share{}, false, fmt.Errorf("MIG device %s: the catalog has no MIG profiles for model %q", device, g.Model)
		}
		for _, p := range spec.Profiles {
			for _, start := range p.Starts {
				if MIGDeviceName(g.Index, p.Name, start) == device {
					return placement.MIGShare(spec, g, placement.MIGChoice{Start: start, Create: true}, p.Name), true, nil
				}
			}
		}
		return binding.Share{}, false, fmt.Errorf("GPU %d (%s, %s) offers no MIG device %s", g.Index, g.UUID, g.Model, device)
	}
	return binding.Share{}, false, nil
}
