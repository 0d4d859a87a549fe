package migctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
)

// ErrInUse is returned when an instance cannot be destroyed because a
// process still uses it; the instance is left as it was.
var ErrInUse = errors.New("MIG instance in use")

// Instance is a MIG instance on one GPU: a GPU instance and the compute
// instance that spans it.
type Instance struct {
	// GPU is the parent GPU's UUID (set by Manager).
	GPU string
	// Profile is the catalog profile name ("3g.40gb").
	Profile string
	// Start is the GPU instance's first memory slice.
	Start int
	// UUID is the MIG device's UUID ("MIG-…").
	UUID string
	// GPUInstanceID and ComputeInstanceID are NVML's ids on the parent.
	GPUInstanceID, ComputeInstanceID int
}

// profileIDs maps a catalog profile to NVML's GPU instance and compute
// instance profile ids: by compute slices, with the +me profiles
// (REV1: the GPU's media engines) and the 1-slice profiles of two memory
// slices (REV2: 1g.20gb on an A100-80GB) told apart.
func profileIDs(spec *catalog.MIGSpec, p catalog.MIGProfile) (gi, ci int, err error) {
	media := strings.HasSuffix(p.Name, "+me")
	switch {
	case media && p.ComputeSlices == 1:
		gi = nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1
	case media && p.ComputeSlices == 2:
		gi = nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1
	case p.ComputeSlices == 1 && p.MemorySlices == 2 && spec.MemorySlices == 8:
		gi = nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2
	}
	bySlices := map[int][2]int{
		1: {nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE},
		2: {nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE},
		3: {nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE},
		4: {nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE},
		6: {nvml.GPU_INSTANCE_PROFILE_6_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE},
		7: {nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE},
		8: {nvml.GPU_INSTANCE_PROFILE_8_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE},
	}
	ids, ok := bySlices[p.ComputeSlices]
	if !ok {
		return 0, 0, fmt.Errorf("MIG profile %s: no NVML profile of %d compute slices", p.Name, p.ComputeSlices)
	}
	if gi == 0 && !media && !(p.ComputeSlices == 1 && p.MemorySlices == 2 && spec.MemorySlices == 8) {
		gi = ids[0]
	}
	return gi, ids[1], nil
}

// call names a failed NVML call.
func call(what string, ret nvml.Return) error {
	return fmt.Errorf("%s: %s", what, nvml.ErrorString(ret))
}

// Create makes an instance of profile at start on dev: the GPU instance at
// that placement, then its compute instance, then reads the MIG device's
// UUID. On any failure after the GPU instance exists it is destroyed, so
// nothing is left behind (the returned error says so if that fails too).
func Create(dev nvml.Device, spec *catalog.MIGSpec, profile string, start int) (Instance, error) {
	if spec == nil {
		return Instance{}, errors.New("GPU has no MIG geometry in the catalog")
	}
	i := spec.ProfileIndex(profile)
	if i < 0 {
		return Instance{}, fmt.Errorf("MIG profile %s: not a profile of this GPU (%s)", profile, strings.Join(spec.ProfileNames(), ", "))
	}
	p := spec.Profiles[i]
	giID, ciID, err := profileIDs(spec, p)
	if err != nil {
		return Instance{}, err
	}
	info, ret := dev.GetGpuInstanceProfileInfo(giID)
	if ret != nvml.SUCCESS {
		return Instance{}, call(fmt.Sprintf("GetGpuInstanceProfileInfo(%d) for %s", giID, p.Name), ret)
	}
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(p.MemorySlices)})
	if ret != nvml.SUCCESS {
		return Instance{}, call(fmt.Sprintf("create GPU instance %s at slice %d", p.Name, start), ret)
	}
	undo := func(cause error) error {
		if r := gi.Destroy(); r != nvml.SUCCESS {
			return errors.Join(cause, fmt.Errorf("GPU instance %s at slice %d left behind: %w", p.Name, start, call("destroy", r)))
		}
		return cause
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return Instance{}, undo(call("read the new GPU instance", ret))
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(ciID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return Instance{}, undo(call(fmt.Sprintf("GetComputeInstanceProfileInfo(%d) for %s", ciID, p.Name), ret))
	}
	ci, ret := gi.CreateComputeInstance(&ciInfo)
	if ret != nvml.SUCCESS {
		return Instance{}, undo(call(fmt.Sprintf("create compute instance of %s at slice %d", p.Name, start), ret))
	}
	ciInfoNow, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		_ = ci.Destroy()
		return Instance{}, undo(call("read the new compute instance", ret))
	}
	inst := Instance{Profile: p.Name, Start: start, GPUInstanceID: int(giInfo.Id), ComputeInstanceID: int(ciInfoNow.Id)}
	if inst.UUID, err = migUUID(dev, inst.GPUInstanceID, inst.ComputeInstanceID); err != nil {
		_ = ci.Destroy()
		return Instance{}, undo(err)
	}
	return inst, nil
}

// migUUID finds the MIG device of a GPU and compute instance and reads its UUID.
func migUUID(dev nvml.Device, gi, ci int) (string, error) {
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", call("GetMaxMigDeviceCount", ret)
	}
	for k := 0; k < n; k++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return "", call(fmt.Sprintf("GetMigDeviceHandleByIndex(%d)", k), ret)
		}
		g, r1 := mig.GetGpuInstanceId()
		c, r2 := mig.GetComputeInstanceId()
		if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS || g != gi || c != ci {
			continue
		}
		uuid, ret := mig.GetUUID()
		if ret != nvml.SUCCESS {
			return "", call("GetUUID of the new MIG device", ret)
		}
		return uuid, nil
	}
	return "", fmt.Errorf("no MIG device for GPU instance %d, compute instance %d", gi, ci)
}

// List reads the GPU instances on dev with their start, profile and (for
// those with a compute instance) MIG device UUID.
func List(dev nvml.Device, spec *catalog.MIGSpec) ([]Instance, error) {
	if spec == nil {
		return nil, errors.New("GPU has no MIG geometry in the catalog")
	}
	var out []Instance
	for _, p := range spec.Profiles {
		giID, _, err := profileIDs(spec, p)
		if err != nil {
			return nil, err
		}
		info, ret := dev.GetGpuInstanceProfileInfo(giID)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, call(fmt.Sprintf("GetGpuInstanceProfileInfo(%d)", giID), ret)
		}
		gis, ret := dev.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, call(fmt.Sprintf("GetGpuInstances(%s)", p.Name), ret)
		}
		for _, gi := range gis {
			gInfo, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, call("GPU instance GetInfo", ret)
			}
			inst := Instance{Profile: p.Name, Start: int(gInfo.Placement.Start), GPUInstanceID: int(gInfo.Id), ComputeInstanceID: -1}
			if cis, err := computeInstances(gi); err == nil && len(cis) > 0 {
				if cInfo, ret := cis[0].GetInfo(); ret == nvml.SUCCESS {
					inst.ComputeInstanceID = int(cInfo.Id)
					if uuid, err := migUUID(dev, inst.GPUInstanceID, inst.ComputeInstanceID); err == nil {
						inst.UUID = uuid
					}
				}
			} else if err != nil {
				return nil, err
			}
			out = append(out, inst)
		}
	}
	return out, nil
}

// computeInstances lists a GPU instance's compute instances (of every
// compute profile it offers).
func computeInstances(gi nvml.GpuInstance) ([]nvml.ComputeInstance, error) {
	var out []nvml.ComputeInstance
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, call(fmt.Sprintf("GetComputeInstanceProfileInfo(%d)", id), ret)
		}
		cis, ret := gi.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, call("GetComputeInstances", ret)
		}
		out = append(out, cis...)
	}
	return out, nil
}

// Destroy destroys the instance of profile at start on dev: its compute
// instances, then the GPU instance. An instance a process uses is left as
// it is and ErrInUse returned; a missing one is not an error.
func Destroy(dev nvml.Device, spec *catalog.MIGSpec, profile string, start int) error {
	i := spec.ProfileIndex(profile)
	if i < 0 {
		return fmt.Errorf("MIG profile %s: not a profile of this GPU", profile)
	}
	giID, _, err := profileIDs(spec, spec.Profiles[i])
	if err != nil {
		return err
	}
	info, ret := dev.GetGpuInstanceProfileInfo(giID)
	if ret != nvml.SUCCESS {
		return call(fmt.Sprintf("GetGpuInstanceProfileInfo(%d)", giID), ret)
	}
	gis, ret := dev.GetGpuInstances(&info)
	if ret != nvml.SUCCESS {
		return call("GetGpuInstances", ret)
	}
	for _, gi := range gis {
		gInfo, ret := gi.GetInfo()
		if ret != nvml.SUCCESS || int(gInfo.Placement.Start) != start {
			continue
		}
		cis, err := computeInstances(gi)
		if err != nil {
			return err
		}
		for _, ci := range cis {
			if r := ci.Destroy(); r == nvml.ERROR_IN_USE {
				return fmt.Errorf("%s at slice %d: %w", profile, start, ErrInUse)
			} else if r != nvml.SUCCESS {
				return call(fmt.Sprintf("destroy compute instance of %s at slice %d", profile, start), r)
			}
		}
		if r := gi.Destroy(); r == nvml.ERROR_IN_USE {
			return fmt.Errorf("%s at slice %d: %w", profile, start, ErrInUse)
		} else if r != nvml.SUCCESS {
			return call(fmt.Sprintf("destroy GPU instance %s at slice %d", profile, start), r)
		}
		return nil
	}
	return nil
}
