package migctl

import (
	"fmt"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
)

// fakeGPU is a GPU in MIG mode behind go-nvml's interfaces, whose slot
// rules are the catalog's (a profile's size and valid starts, no overlap,
// at most one +me instance), not go-nvml's mock tables. Unimplemented
// methods panic through the nil embedded interface.
type fakeGPU struct {
	nvml.Device
	spec   *catalog.MIGSpec
	uuid   string
	gis    map[uint32]*fakeGI
	nextGI uint32
	calls  []string

	// Failures to inject.
	refuseGI  nvml.Return // CreateGpuInstanceWithPlacement
	refuseCI  nvml.Return // CreateComputeInstance
	refuseGID nvml.Return // GpuInstance.Destroy
}

type fakeGI struct {
	nvml.GpuInstance
	gpu     *fakeGPU
	id      uint32
	profile int // catalog index
	start   int
	cis     map[uint32]*fakeCI
	nextCI  uint32
}

type fakeCI struct {
	nvml.ComputeInstance
	gi   *fakeGI
	id   uint32
	busy bool
}

type fakeMIGDevice struct {
	nvml.Device
	ci *fakeCI
}

func newFakeGPU(spec *catalog.MIGSpec, uuid string) *fakeGPU {
	return &fakeGPU{spec: spec, uuid: uuid, gis: map[uint32]*fakeGI{}, refuseGI: nvml.SUCCESS, refuseCI: nvml.SUCCESS, refuseGID: nvml.SUCCESS}
}

// profileOf maps an NVML GPU instance profile id back to the catalog.
func (f *fakeGPU) profileOf(id int) int {
	for i, p := range f.spec.Profiles {
		if gi, _, err := profileIDs(f.spec, p); err == nil && gi == id {
			return i
		}
	}
	return -1
}

func (f *fakeGPU) GetGpuInstanceProfileInfo(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	i := f.profileOf(id)
	if i < 0 {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	p := f.spec.Profiles[i]
	return nvml.GpuInstanceProfileInfo{Id: uint32(id), SliceCount: uint32(p.ComputeSlices), MemorySizeMB: uint64(p.MemoryMiB)}, nvml.SUCCESS
}

func (f *fakeGPU) used() (uint32, bool) {
	var used uint32
	media := false
	for _, gi := range f.gis {
		p := f.spec.Profiles[gi.profile]
		for s := gi.start; s < gi.start+p.MemorySlices; s++ {
			used |= 1 << s
		}
		if len(p.Name) > 3 && p.Name[len(p.Name)-3:] == "+me" {
			media = true
		}
	}
	return used, media
}

func (f *fakeGPU) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	f.calls = append(f.calls, fmt.Sprintf("createGI(%d@%d)", info.Id, pl.Start))
	if f.refuseGI != nvml.SUCCESS {
		return nil, f.refuseGI
	}
	i := f.profileOf(int(info.Id))
	if i < 0 || int(pl.Size) != f.spec.Profiles[i].MemorySlices {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	used, media := f.used()
	if why := f.spec.CanPlace(used, media, i, int(pl.Start)); why != "" {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	f.nextGI++
	gi := &fakeGI{gpu: f, id: f.nextGI, profile: i, start: int(pl.Start), cis: map[uint32]*fakeCI{}}
	f.gis[gi.id] = gi
	return gi, nvml.SUCCESS
}

func (f *fakeGPU) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	i := f.profileOf(int(info.Id))
	var out []nvml.GpuInstance
	for _, id := range f.giIDs() {
		if f.gis[id].profile == i {
			out = append(out, f.gis[id])
		}
	}
	return out, nvml.SUCCESS
}

func (f *fakeGPU) giIDs() []uint32 {
	var ids []uint32
	for id := range f.gis {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// migDevices lists the compute instances in a stable order.
func (f *fakeGPU) migDevices() []*fakeCI {
	var out []*fakeCI
	for _, id := range f.giIDs() {
		gi := f.gis[id]
		var cids []uint32
		for c := range gi.cis {
			cids = append(cids, c)
		}
		sort.Slice(cids, func(a, b int) bool { return cids[a] < cids[b] })
		for _, c := range cids {
			out = append(out, gi.cis[c])
		}
	}
	return out
}

func (f *fakeGPU) GetMaxMigDeviceCount() (int, nvml.Return) { return 7, nvml.SUCCESS }

func (f *fakeGPU) GetMigDeviceHandleByIndex(k int) (nvml.Device, nvml.Return) {
	devs := f.migDevices()
	if k >= len(devs) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return &fakeMIGDevice{ci: devs[k]}, nvml.SUCCESS
}

func (d *fakeMIGDevice) GetGpuInstanceId() (int, nvml.Return)     { return int(d.ci.gi.id), nvml.SUCCESS }
func (d *fakeMIGDevice) GetComputeInstanceId() (int, nvml.Return) { return int(d.ci.id), nvml.SUCCESS }
func (d *fakeMIGDevice) GetUUID() (string, nvml.Return) {
	return fmt.Sprintf("MIG-%s-%d-%d", d.ci.gi.gpu.uuid, d.ci.gi.id, d.ci.id), nvml.SUCCESS
}

func (g *fakeGI) GetInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	gi, _, _ := profileIDs(g.gpu.spec, g.gpu.spec.Profiles[g.profile])
	p := g.gpu.spec.Profiles[g.profile]
	return nvml.GpuInstanceInfo{Device: g.gpu, Id: g.id, ProfileId: uint32(gi), Placement: nvml.GpuInstancePlacement{Start: uint32(g.start), Size: uint32(p.MemorySlices)}}, nvml.SUCCESS
}

// GetComputeInstanceProfileInfo offers the one compute profile spanning
// the GPU instance.
func (g *fakeGI) GetComputeInstanceProfileInfo(id, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	_, ci, _ := profileIDs(g.gpu.spec, g.gpu.spec.Profiles[g.profile])
	if id != ci || eng != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.ComputeInstanceProfileInfo{Id: uint32(id), SliceCount: uint32(g.gpu.spec.Profiles[g.profile].ComputeSlices), InstanceCount: 1}, nvml.SUCCESS
}

func (g *fakeGI) CreateComputeInstance(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	g.gpu.calls = append(g.gpu.calls, fmt.Sprintf("createCI(%d)", g.id))
	if g.gpu.refuseCI != nvml.SUCCESS {
		return nil, g.gpu.refuseCI
	}
	if len(g.cis) > 0 {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	g.nextCI++
	ci := &fakeCI{gi: g, id: g.nextCI}
	g.cis[ci.id] = ci
	return ci, nvml.SUCCESS
}

func (g *fakeGI) GetComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	var out []nvml.ComputeInstance
	for _, c := range g.gpu.migDevices() {
		if c.gi == g {
			out = append(out, c)
		}
	}
	return out, nvml.SUCCESS
}

// Destroy refuses while a compute instance exists, as NVML does.
func (g *fakeGI) Destroy() nvml.Return {
	g.gpu.calls = append(g.gpu.calls, fmt.Sprintf("destroyGI(%d)", g.id))
	if g.gpu.refuseGID != nvml.SUCCESS {
		return g.gpu.refuseGID
	}
	if len(g.cis) > 0 {
		return nvml.ERROR_IN_USE
	}
	delete(g.gpu.gis, g.id)
	return nvml.SUCCESS
}

func (c *fakeCI) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	return nvml.ComputeInstanceInfo{GpuInstance: c.gi, Id: c.id}, nvml.SUCCESS
}

// Destroy refuses while a process uses the instance.
func (c *fakeCI) Destroy() nvml.Return {
	if c.busy {
		return nvml.ERROR_IN_USE
	}
	delete(c.gi.cis, c.id)
	return nvml.SUCCESS
}
