package migsim

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
)

// GPU is a GPU in MIG mode. Safe for concurrent use.
type GPU struct {
	nvml.Device

	spec  *catalog.MIGSpec
	uuid  string
	minor int

	mu     sync.Mutex
	gis    map[uint32]*gpuInstance
	nextGI uint32
	calls  []string
	fail   map[Op]nvml.Return
}

// Op is a driver call whose failure a test injects.
type Op string

// Injectable failures.
const (
	// CreateGPUInstance is CreateGpuInstanceWithPlacement.
	CreateGPUInstance Op = "createGI"
	// CreateComputeInstance is GpuInstance.CreateComputeInstance.
	CreateComputeInstance Op = "createCI"
	// DestroyGPUInstance is GpuInstance.Destroy.
	DestroyGPUInstance Op = "destroyGI"
)

type gpuInstance struct {
	nvml.GpuInstance
	gpu     *GPU
	id      uint32
	profile int // catalog index
	start   int
	cis     map[uint32]*computeInstance
	nextCI  uint32
}

type computeInstance struct {
	nvml.ComputeInstance
	gi   *gpuInstance
	id   uint32
	busy bool
}

// migDevice is the MIG device handle of a compute instance.
type migDevice struct {
	nvml.Device
	ci *computeInstance
}

// NewGPU returns an empty GPU in MIG mode with spec's geometry, its UUID
// and its device minor number (/dev/nvidia<minor>).
func NewGPU(spec *catalog.MIGSpec, uuid string, minor int) *GPU {
	return &GPU{spec: spec, uuid: uuid, minor: minor, gis: map[uint32]*gpuInstance{}, fail: map[Op]nvml.Return{}}
}

// Fail makes every later call op return ret (nvml.SUCCESS clears it).
func (g *GPU) Fail(op Op, ret nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ret == nvml.SUCCESS {
		delete(g.fail, op)
		return
	}
	g.fail[op] = ret
}

// Calls returns the creating and destroying calls made so far
// ("createGI(<profile id>@<start>)", "createCI(<gi>)", "destroyGI(<gi>)").
func (g *GPU) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// Layout is the GPU's GPU instances as "profile@start", by start.
func (g *GPU) Layout() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var parts []string
	for _, id := range g.giIDsLocked() {
		gi := g.gis[id]
		parts = append(parts, fmt.Sprintf("%s@%d", g.spec.Profiles[gi.profile].Name, gi.start))
	}
	sort.Slice(parts, func(a, b int) bool {
		return startOf(parts[a]) < startOf(parts[b])
	})
	return strings.Join(parts, " ")
}

func startOf(s string) string {
	_, st, _ := strings.Cut(s, "@")
	return st
}

// SetBusy marks the compute instances of the GPU instance at start as used
// by a process (their Destroy then fails with ERROR_IN_USE, as NVML's
// does) or free; it reports whether such an instance exists.
func (g *GPU) SetBusy(start int, busy bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	found := false
	for _, gi := range g.gis {
		if gi.start == start {
			for _, ci := range gi.cis {
				ci.busy, found = busy, true
			}
		}
	}
	return found
}

// UUID is the GPU's UUID.
func (g *GPU) UUID() string { return g.uuid }

// profileID is the NVML GPU instance profile id the driver gives catalog
// profile p (nvml.h's NVML_GPU_INSTANCE_PROFILE_*): by compute slices;
// the +me profiles are the REV1 variants, the one-slice profiles of two
// memory slices on an 8-slice GPU (1g.20gb) REV2.
func profileID(spec *catalog.MIGSpec, p catalog.MIGProfile) int {
	media := strings.HasSuffix(p.Name, "+me")
	switch {
	case media && p.ComputeSlices == 1:
		return nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1
	case media && p.ComputeSlices == 2:
		return nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1
	case p.ComputeSlices == 1 && p.MemorySlices == 2 && spec.MemorySlices == 8:
		return nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2
	}
	return map[int]int{
		1: nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE, 3: nvml.GPU_INSTANCE_PROFILE_3_SLICE,
		4: nvml.GPU_INSTANCE_PROFILE_4_SLICE, 6: nvml.GPU_INSTANCE_PROFILE_6_SLICE, 7: nvml.GPU_INSTANCE_PROFILE_7_SLICE,
		8: nvml.GPU_INSTANCE_PROFILE_8_SLICE,
	}[p.ComputeSlices]
}

// computeProfileID is the compute instance profile spanning a GPU instance.
func computeProfileID(p catalog.MIGProfile) int {
	return map[int]int{
		1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, 3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
		4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
		8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
	}[p.ComputeSlices]
}

// profileOf maps an NVML GPU instance profile id to the catalog.
func (g *GPU) profileOf(id int) int {
	for i, p := range g.spec.Profiles {
		if profileID(g.spec, p) == id {
			return i
		}
	}
	return -1
}

// GetUUID implements nvml.Device.
func (g *GPU) GetUUID() (string, nvml.Return) { return g.uuid, nvml.SUCCESS }

// GetMinorNumber implements nvml.Device.
func (g *GPU) GetMinorNumber() (int, nvml.Return) { return g.minor, nvml.SUCCESS }

// IsMigDeviceHandle implements nvml.Device: a GPU, not a MIG device.
func (g *GPU) IsMigDeviceHandle() (bool, nvml.Return) { return false, nvml.SUCCESS }

// GetMigMode implements nvml.Device: MIG mode is on, now and pending.
func (g *GPU) GetMigMode() (int, int, nvml.Return) {
	return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
}

// GetGpuInstanceProfileInfo implements nvml.Device.
func (g *GPU) GetGpuInstanceProfileInfo(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	i := g.profileOf(id)
	if i < 0 {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	p := g.spec.Profiles[i]
	return nvml.GpuInstanceProfileInfo{Id: uint32(id), SliceCount: uint32(p.ComputeSlices), MemorySizeMB: uint64(p.MemoryMiB), InstanceCount: uint32(p.MaxInstances)}, nvml.SUCCESS
}

// usedLocked is the memory slices GPU instances occupy and whether one
// of them holds the media engines.
func (g *GPU) usedLocked() (uint32, bool) {
	var used uint32
	media := false
	for _, gi := range g.gis {
		p := g.spec.Profiles[gi.profile]
		for s := gi.start; s < gi.start+p.MemorySlices; s++ {
			used |= 1 << s
		}
		if strings.HasSuffix(p.Name, "+me") {
			media = true
		}
	}
	return used, media
}

// CreateGpuInstanceWithPlacement implements nvml.Device: the placement's
// size must be the profile's, and its start one the catalog allows on the
// free slices (ERROR_INSUFFICIENT_RESOURCES otherwise, as NVML answers).
func (g *GPU) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, fmt.Sprintf("createGI(%d@%d)", info.Id, pl.Start))
	if r, ok := g.fail[CreateGPUInstance]; ok {
		return nil, r
	}
	i := g.profileOf(int(info.Id))
	if i < 0 || int(pl.Size) != g.spec.Profiles[i].MemorySlices {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	used, media := g.usedLocked()
	if why := g.spec.CanPlace(used, media, i, int(pl.Start)); why != "" {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	g.nextGI++
	gi := &gpuInstance{gpu: g, id: g.nextGI, profile: i, start: int(pl.Start), cis: map[uint32]*computeInstance{}}
	g.gis[gi.id] = gi
	return gi, nvml.SUCCESS
}

// GetGpuInstances implements nvml.Device.
func (g *GPU) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := g.profileOf(int(info.Id))
	if i < 0 {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	var out []nvml.GpuInstance
	for _, id := range g.giIDsLocked() {
		if g.gis[id].profile == i {
			out = append(out, g.gis[id])
		}
	}
	return out, nvml.SUCCESS
}

// GetGpuInstanceById implements nvml.Device.
func (g *GPU) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gi, ok := g.gis[uint32(id)]
	if !ok {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return gi, nvml.SUCCESS
}

func (g *GPU) giIDsLocked() []uint32 {
	ids := make([]uint32, 0, len(g.gis))
	for id := range g.gis {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// migDevicesLocked lists the compute instances in a stable order.
func (g *GPU) migDevicesLocked() []*computeInstance {
	var out []*computeInstance
	for _, id := range g.giIDsLocked() {
		gi := g.gis[id]
		cids := make([]uint32, 0, len(gi.cis))
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

// GetMaxMigDeviceCount implements nvml.Device.
func (g *GPU) GetMaxMigDeviceCount() (int, nvml.Return) { return g.spec.ComputeSlices, nvml.SUCCESS }

// GetMigDeviceHandleByIndex implements nvml.Device.
func (g *GPU) GetMigDeviceHandleByIndex(k int) (nvml.Device, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	devs := g.migDevicesLocked()
	if k < 0 || k >= len(devs) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return &migDevice{ci: devs[k]}, nvml.SUCCESS
}

// migUUID names a compute instance's MIG device.
func migUUID(ci *computeInstance) string {
	return fmt.Sprintf("MIG-%s-%d-%d", ci.gi.gpu.uuid, ci.gi.id, ci.id)
}

// byUUIDLocked finds a MIG device by its UUID.
func (g *GPU) byUUIDLocked(uuid string) *computeInstance {
	for _, ci := range g.migDevicesLocked() {
		if migUUID(ci) == uuid {
			return ci
		}
	}
	return nil
}

func (d *migDevice) IsMigDeviceHandle() (bool, nvml.Return) { return true, nvml.SUCCESS }
func (d *migDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return d.ci.gi.gpu, nvml.SUCCESS
}
func (d *migDevice) GetGpuInstanceId() (int, nvml.Return)     { return int(d.ci.gi.id), nvml.SUCCESS }
func (d *migDevice) GetComputeInstanceId() (int, nvml.Return) { return int(d.ci.id), nvml.SUCCESS }
func (d *migDevice) GetUUID() (string, nvml.Return)           { return migUUID(d.ci), nvml.SUCCESS }

// GetInfo implements nvml.GpuInstance.
func (gi *gpuInstance) GetInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	p := gi.gpu.spec.Profiles[gi.profile]
	return nvml.GpuInstanceInfo{Device: gi.gpu, Id: gi.id, ProfileId: uint32(profileID(gi.gpu.spec, p)),
		Placement: nvml.GpuInstancePlacement{Start: uint32(gi.start), Size: uint32(p.MemorySlices)}}, nvml.SUCCESS
}

// GetComputeInstanceProfileInfo implements nvml.GpuInstance: the one
// compute profile spanning the GPU instance, with shared engines.
func (gi *gpuInstance) GetComputeInstanceProfileInfo(id, eng int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	p := gi.gpu.spec.Profiles[gi.profile]
	if id != computeProfileID(p) || eng != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.ComputeInstanceProfileInfo{Id: uint32(id), SliceCount: uint32(p.ComputeSlices), InstanceCount: 1}, nvml.SUCCESS
}

// CreateComputeInstance implements nvml.GpuInstance (one per GPU
// instance: the one spanning it).
func (gi *gpuInstance) CreateComputeInstance(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	g := gi.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, fmt.Sprintf("createCI(%d)", gi.id))
	if r, ok := g.fail[CreateComputeInstance]; ok {
		return nil, r
	}
	if _, ok := g.gis[gi.id]; !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if len(gi.cis) > 0 {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	gi.nextCI++
	ci := &computeInstance{gi: gi, id: gi.nextCI - 1} // compute instance ids start at 0
	gi.cis[ci.id] = ci
	return ci, nvml.SUCCESS
}

// GetComputeInstances implements nvml.GpuInstance.
func (gi *gpuInstance) GetComputeInstances(*nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	g := gi.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []nvml.ComputeInstance
	for _, c := range g.migDevicesLocked() {
		if c.gi == gi {
			out = append(out, c)
		}
	}
	return out, nvml.SUCCESS
}

// Destroy implements nvml.GpuInstance: refused while a compute instance
// exists (ERROR_IN_USE), as NVML does.
func (gi *gpuInstance) Destroy() nvml.Return {
	g := gi.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, fmt.Sprintf("destroyGI(%d)", gi.id))
	if r, ok := g.fail[DestroyGPUInstance]; ok {
		return r
	}
	if len(gi.cis) > 0 {
		return nvml.ERROR_IN_USE
	}
	delete(g.gis, gi.id)
	return nvml.SUCCESS
}

// GetInfo implements nvml.ComputeInstance.
func (ci *computeInstance) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	return nvml.ComputeInstanceInfo{GpuInstance: ci.gi, Id: ci.id}, nvml.SUCCESS
}

// Destroy implements nvml.ComputeInstance: refused while a process uses
// the instance (ERROR_IN_USE).
func (ci *computeInstance) Destroy() nvml.Return {
	g := ci.gi.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	if ci.busy {
		return nvml.ERROR_IN_USE
	}
	delete(ci.gi.cis, ci.id)
	return nvml.SUCCESS
}
