package nvmlgpu

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"

	"github.com/tessera-gpu/tessera/inventory"
)

// attrsOf are the attributes of a MIG device that fills a whole GPU instance
// of profile p.
func attrsOf(p nvml.GpuInstanceProfileInfo) nvml.DeviceAttributes {
	return nvml.DeviceAttributes{
		MultiprocessorCount:       p.MultiprocessorCount,
		SharedCopyEngineCount:     p.CopyEngineCount,
		SharedDecoderCount:        p.DecoderCount,
		SharedEncoderCount:        p.EncoderCount,
		SharedJpegCount:           p.JpegCount,
		SharedOfaCount:            p.OfaCount,
		GpuInstanceSliceCount:     p.SliceCount,
		ComputeInstanceSliceCount: p.SliceCount,
		MemorySizeMB:              p.MemorySizeMB,
	}
}

func profileList(cfg gpus.Config) []nvml.GpuInstanceProfileInfo {
	var out []nvml.GpuInstanceProfileInfo
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		if p, ok := cfg.MIGProfiles.GpuInstanceProfiles[id]; ok {
			out = append(out, p)
		}
	}
	return out
}

// TestMIGProfileNames names every GPU instance profile of go-nvml's fake GPUs.
func TestMIGProfileNames(t *testing.T) {
	std := func(small, me, big1g, g2, g3, g4, g7 string) map[int]string {
		return map[int]string{
			nvml.GPU_INSTANCE_PROFILE_1_SLICE: small, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: me,
			nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: big1g, nvml.GPU_INSTANCE_PROFILE_2_SLICE: g2,
			nvml.GPU_INSTANCE_PROFILE_3_SLICE: g3, nvml.GPU_INSTANCE_PROFILE_4_SLICE: g4, nvml.GPU_INSTANCE_PROFILE_7_SLICE: g7,
		}
	}
	tests := []struct {
		name     string
		cfg      gpus.Config
		totalMiB int64
		want     map[int]string
	}{
		{"A100-40GB", gpus.A100_SXM4_40GB, 40960, std("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")},
		{"A100-40GB as reported", gpus.A100_SXM4_40GB, 40536, std("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")},
		{"A100-80GB", gpus.A100_SXM4_80GB, 81920, std("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		{"H100", gpus.H100_SXM5_80GB, 81920, std("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		{"H100 as reported", gpus.H100_SXM5_80GB, 81559, std("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")},
		{"H200", gpus.H200_SXM5_141GB, 144384, std("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")},
		{"H200 as reported", gpus.H200_SXM5_141GB, 143771, std("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")},
		{"B200", gpus.B200_SXM5_180GB, 184320, std("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")},
		{"A30", gpus.A30_PCIE_24GB, 24576, map[int]string{
			nvml.GPU_INSTANCE_PROFILE_1_SLICE: "1g.6gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: "1g.6gb+me",
			nvml.GPU_INSTANCE_PROFILE_2_SLICE: "2g.12gb", nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1: "2g.12gb+me",
			nvml.GPU_INSTANCE_PROFILE_4_SLICE: "4g.24gb",
		}},
	}
	for _, tt := range tests {
		profiles := profileList(tt.cfg)
		if len(profiles) != len(tt.want) {
			t.Errorf("%s: %d profiles, want %d", tt.name, len(profiles), len(tt.want))
		}
		for _, p := range profiles {
			if got := migProfileName(attrsOf(p), tt.totalMiB, profiles); got != tt.want[int(p.Id)] {
				t.Errorf("%s: profile %d (%d MiB) named %q, want %q", tt.name, p.Id, p.MemorySizeMB, got, tt.want[int(p.Id)])
			}
		}
	}
}

func TestMIGProfileNameVariants(t *testing.T) {
	h100 := profileList(gpus.H100_SXM5_80GB)
	p2 := gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_2_SLICE]
	ci := attrsOf(p2)
	ci.ComputeInstanceSliceCount = 1
	gfx := nvml.GpuInstanceProfileInfo{Id: nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, SliceCount: 1, MemorySizeMB: 24576}
	noME := nvml.GpuInstanceProfileInfo{Id: nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, SliceCount: 1, MemorySizeMB: 12288, DecoderCount: 0}
	allME := nvml.GpuInstanceProfileInfo{Id: nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, SliceCount: 1, MemorySizeMB: 12288, DecoderCount: 4, JpegCount: 4, OfaCount: 1}
	tests := []struct {
		name     string
		attrs    nvml.DeviceAttributes
		totalMiB int64
		profiles []nvml.GpuInstanceProfileInfo
		want     string
	}{
		{"smaller compute instance", ci, 81920, h100, "1c.2g.20gb"},
		{"no profile list", attrsOf(p2), 81920, nil, "2g.20gb"},
		{"unknown total memory", attrsOf(p2), 0, nil, "2g.20gb"},
		{"no attributes", nvml.DeviceAttributes{}, 81920, h100, ""},
		{"graphics", attrsOf(gfx), 98304, []nvml.GpuInstanceProfileInfo{gfx}, "1g.24gb+gfx"},
		{"without media", attrsOf(noME), 98304, []nvml.GpuInstanceProfileInfo{noME, allME}, "1g.12gb-me"},
		{"all media", attrsOf(allME), 98304, []nvml.GpuInstanceProfileInfo{noME, allME}, "1g.12gb+me.all"},
	}
	for _, tt := range tests {
		if got := migProfileName(tt.attrs, tt.totalMiB, tt.profiles); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// migParent turns d into an H100 with MIG enabled whose slots hold migs
// (nil for an empty slot).
func migParent(d *mock.Device, migs ...*mock.Device) {
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return len(migs), nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		if k < 0 || k >= len(migs) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if migs[k] == nil {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[k], nvml.SUCCESS
	}
	d.GetGpuInstanceProfileInfoFunc = func(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		if id < 0 || id >= nvml.GPU_INSTANCE_PROFILE_COUNT {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		p, ok := gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles[id]
		if !ok {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return p, nvml.SUCCESS
	}
}

// migDevice returns a MIG device filling a GPU instance of the H100 profile id.
func migDevice(uuid string, id int) *mock.Device {
	a := attrsOf(gpus.H100_SXM5_80GB.MIGProfiles.GpuInstanceProfiles[id])
	return &mock.Device{
		GetUUIDFunc:          func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetAttributesFunc:    func() (nvml.DeviceAttributes, nvml.Return) { return a, nvml.SUCCESS },
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
	}
}

// withStarts gives parent's MIG devices GPU instance ids (their slot
// index + 1) whose placements start at starts[uuid]; a device absent from
// starts has an instance NVML refuses to read (no privileges).
func withStarts(parent *mock.Device, migs []*mock.Device, starts map[string]int) {
	byID := map[int]int{}
	for k, m := range migs {
		if m == nil {
			continue
		}
		uuid, _ := m.GetUUID()
		id := k + 1
		m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return id, nvml.SUCCESS }
		if s, ok := starts[uuid]; ok {
			byID[id] = s
		}
	}
	parent.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		s, ok := byID[id]
		if !ok {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		return &mock.GpuInstance{GetInfoFunc: func() (nvml.GpuInstanceInfo, nvml.Return) {
			return nvml.GpuInstanceInfo{Id: uint32(id), Placement: nvml.GpuInstancePlacement{Start: uint32(s)}}, nvml.SUCCESS
		}}, nvml.SUCCESS
	}
}

func TestDiscoverMIG(t *testing.T) {
	d0, d1 := fakeDevice(0), fakeDevice(1)
	migs := []*mock.Device{
		migDevice("MIG-a", nvml.GPU_INSTANCE_PROFILE_3_SLICE),
		nil,
		migDevice("MIG-b", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1),
		migDevice("MIG-c", nvml.GPU_INSTANCE_PROFILE_2_SLICE),
		nil, nil, nil}
	migParent(d0, migs...)
	// MIG-a and MIG-b's placements are read; MIG-c's is refused.
	withStarts(d0, migs, map[string]int{"MIG-a": 4, "MIG-b": 0})
	migParent(d1) // enabled, nothing configured
	nodes, err := newTestSource(fakeLib(d0, d1)).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	g0, g1 := nodes[0].GPUs[0], nodes[0].GPUs[1]
	want := []inventory.MIGInstance{
		{UUID: "MIG-a", Profile: "3g.40gb", MemoryMiB: 40960, SMCount: 48, Start: inventory.Slot(4)},
		{UUID: "MIG-b", Profile: "1g.10gb+me", MemoryMiB: 10240, SMCount: 16, Start: inventory.Slot(0)},
		{UUID: "MIG-c", Profile: "2g.20gb", MemoryMiB: 20480, SMCount: 32},
	}
	if g0.MIGMode != inventory.MIGEnabled || !reflect.DeepEqual(g0.MIGInstances, want) {
		t.Errorf("GPU 0: MIG %s %+v\nwant Enabled %+v", g0.MIGMode, g0.MIGInstances, want)
	}
	if g1.MIGMode != inventory.MIGEnabled || len(g1.MIGInstances) != 0 {
		t.Errorf("GPU 1: MIG %s %+v, want Enabled and none", g1.MIGMode, g1.MIGInstances)
	}
}

func TestDiscoverMIGUnsupportedAttributes(t *testing.T) {
	d := fakeDevice(0)
	mig := migDevice("MIG-a", nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	mig.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED }
	migParent(d, mig)
	nodes, err := newTestSource(fakeLib(d)).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if got := nodes[0].GPUs[0].MIGInstances; !reflect.DeepEqual(got, []inventory.MIGInstance{{UUID: "MIG-a"}}) {
		t.Errorf("MIG instances = %+v, want only the UUID", got)
	}
}

func TestDiscoverMIGErrors(t *testing.T) {
	tests := []struct {
		call    string
		breakIt func(parent, mig *mock.Device)
		where   string
	}{
		{"GetMaxMigDeviceCount", func(p, _ *mock.Device) {
			p.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
		}, "GPU 0:"},
		{"GetMigDeviceHandleByIndex(0)", func(p, _ *mock.Device) {
			p.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
		}, "GPU 0:"},
		{"GetGpuInstanceProfileInfo(0)", func(p, _ *mock.Device) {
			p.GetGpuInstanceProfileInfoFunc = func(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
				return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_UNKNOWN
			}
		}, "GPU 0:"},
		{"GetUUID", func(_, m *mock.Device) {
			m.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
		}, "GPU 0 MIG device 0:"},
		{"GetAttributes", func(_, m *mock.Device) {
			m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return nvml.DeviceAttributes{}, nvml.ERROR_UNKNOWN }
		}, "GPU 0 MIG device 0:"},
	}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			d := fakeDevice(0)
			mig := migDevice("MIG-a", nvml.GPU_INSTANCE_PROFILE_7_SLICE)
			migParent(d, mig)
			tt.breakIt(d, mig)
			_, err := newTestSource(fakeLib(d)).Discover(context.Background())
			if !errors.Is(err, nvml.ERROR_UNKNOWN) {
				t.Fatalf("err = %v, want ERROR_UNKNOWN", err)
			}
			if want := fmt.Sprintf("%s %s", tt.where, tt.call); !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to contain %q", err, want)
			}
		})
	}
}
