package nvmlgpu

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/inventory"
)

// readMIG returns the GPU's current MIG mode and, when it is enabled, its MIG
// devices. They are read through MIG device handles (GetMaxMigDeviceCount,
// GetMigDeviceHandleByIndex), which, unlike listing GPU instances, needs no
// privileges. totalMiB is the parent's memory, used to name profiles.
func (s *Source) readMIG(dev nvml.Device, where string, totalMiB int64) (inventory.MIGMode, []inventory.MIGInstance, error) {
	current, _, ret := dev.GetMigMode()
	switch {
	case unsupported(ret):
		return inventory.MIGUnsupported, nil, nil
	case ret != nvml.SUCCESS:
		return inventory.MIGUnsupported, nil, callErr(where, "GetMigMode", ret)
	case current != nvml.DEVICE_MIG_ENABLE:
		return inventory.MIGDisabled, nil, nil
	}
	slots, _, err := get(where, "GetMaxMigDeviceCount", dev.GetMaxMigDeviceCount)
	if err != nil {
		return inventory.MIGEnabled, nil, err
	}
	var (
		out      []inventory.MIGInstance
		profiles []nvml.GpuInstanceProfileInfo
		loaded   bool
	)
	for k := range slots {
		mig, ret := dev.GetMigDeviceHandleByIndex(k)
		if absent(ret) {
			continue // an empty slot
		}
		if ret != nvml.SUCCESS {
			return inventory.MIGEnabled, nil, callErr(where, fmt.Sprintf("GetMigDeviceHandleByIndex(%d)", k), ret)
		}
		if !loaded {
			if profiles, err = gpuInstanceProfiles(dev, where); err != nil {
				return inventory.MIGEnabled, nil, err
			}
			loaded = true
		}
		inst, err := readMIGDevice(mig, fmt.Sprintf("%s MIG device %d", where, k), totalMiB, profiles)
		if err != nil {
			return inventory.MIGEnabled, nil, err
		}
		inst.Start = migStart(dev, mig)
		out = append(out, inst)
	}
	return inventory.MIGEnabled, out, nil
}

// migStart reads the start slot of a MIG device's GPU instance (its
// placement on the parent), nil when it cannot be read: listing GPU
// instances needs privileges the MIG device handles do not, so an
// unprivileged agent reports instances without starts (the engine then
// uses them as they are and creates nothing beside them).
func migStart(parent, mig nvml.Device) *int {
	id, ret := mig.GetGpuInstanceId()
	if ret != nvml.SUCCESS {
		return nil
	}
	gi, ret := parent.GetGpuInstanceById(id)
	if ret != nvml.SUCCESS || gi == nil {
		return nil
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return nil
	}
	return inventory.Slot(int(info.Placement.Start))
}

// readMIGDevice reads one MIG device (a compute instance in a GPU instance).
func readMIGDevice(mig nvml.Device, where string, totalMiB int64, profiles []nvml.GpuInstanceProfileInfo) (inventory.MIGInstance, error) {
	var inst inventory.MIGInstance
	var err error
	if inst.UUID, _, err = get(where, "GetUUID", mig.GetUUID); err != nil {
		return inst, err
	}
	attrs, ok, err := get(where, "GetAttributes", mig.GetAttributes)
	if err != nil || !ok {
		return inst, err
	}
	inst.MemoryMiB = int64(attrs.MemorySizeMB)
	inst.SMCount = int(attrs.MultiprocessorCount)
	inst.Profile = migProfileName(attrs, totalMiB, profiles)
	return inst, nil
}

// gpuInstanceProfiles lists the GPU instance profiles the GPU offers; they
// tell apart profiles of equal size, such as 1g.10gb and 1g.10gb+me.
func gpuInstanceProfiles(dev nvml.Device, where string) ([]nvml.GpuInstanceProfileInfo, error) {
	var out []nvml.GpuInstanceProfileInfo
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := dev.GetGpuInstanceProfileInfo(id)
		if absent(ret) {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, callErr(where, fmt.Sprintf("GetGpuInstanceProfileInfo(%d)", id), ret)
		}
		out = append(out, info)
	}
	return out, nil
}

// migProfileName names a MIG device as nvidia-smi does: "3g.40gb", with
// "1c." in front when its compute instance has fewer slices than its GPU
// instance, and "+me", "-me", "+me.all" or "+gfx" after it when the matching
// GPU instance profile is a media-extension or graphics variant.
func migProfileName(a nvml.DeviceAttributes, totalMiB int64, profiles []nvml.GpuInstanceProfileInfo) string {
	if a.GpuInstanceSliceCount == 0 {
		return ""
	}
	name := fmt.Sprintf("%dg.%dgb", a.GpuInstanceSliceCount, migMemoryGB(totalMiB, a.MemorySizeMB))
	if c := a.ComputeInstanceSliceCount; c != 0 && c < a.GpuInstanceSliceCount {
		name = fmt.Sprintf("%dc.%s", c, name)
	}
	if p, ok := matchProfile(a, profiles); ok {
		name += profileSuffix(p.Id)
	}
	return name
}

// migMemoryGB is the memory size in a MIG profile name. Like NVIDIA's
// go-nvlib it rounds the instance's share of the GPU's memory up to eighths
// and scales the GPU's memory in GiB (rounded up) by it, but it forgives a
// share up to a tenth of an eighth over, as H200 and B200 profiles are
// (1g.18gb is 18432 of 144384 MiB).
func migMemoryGB(totalMiB int64, migMiB uint64) uint64 {
	if totalMiB <= 0 {
		return uint64(math.Round(float64(migMiB) / 1024))
	}
	eighths := math.Max(1, math.Ceil(float64(migMiB)/float64(totalMiB)*8-0.1))
	totalGB := float64((totalMiB + 1023) / 1024)
	return uint64(math.Round(eighths / 8 * totalGB))
}

// matchProfile finds the GPU instance profile a MIG device's attributes
// belong to: same slices and memory and, among several, the same media
// engines.
func matchProfile(a nvml.DeviceAttributes, profiles []nvml.GpuInstanceProfileInfo) (nvml.GpuInstanceProfileInfo, bool) {
	var found []nvml.GpuInstanceProfileInfo
	for _, p := range profiles {
		if p.SliceCount == a.GpuInstanceSliceCount && p.MemorySizeMB == a.MemorySizeMB {
			found = append(found, p)
		}
	}
	if len(found) > 1 {
		for _, p := range found {
			if p.JpegCount == a.SharedJpegCount && p.OfaCount == a.SharedOfaCount &&
				p.DecoderCount == a.SharedDecoderCount && p.EncoderCount == a.SharedEncoderCount {
				return p, true
			}
		}
	}
	if len(found) == 0 {
		return nvml.GpuInstanceProfileInfo{}, false
	}
	return found[0], true
}

// profileSuffix is the name suffix of a GPU instance profile variant.
func profileSuffix(id uint32) string {
	switch id {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		return "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		return "-me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		return "+me.all"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		return "+gfx"
	default:
		return ""
	}
}
