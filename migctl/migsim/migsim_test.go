package migsim

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
)

func a100(t *testing.T) *catalog.MIGSpec {
	t.Helper()
	m, ok := catalog.Default().Lookup("A100-80GB")
	if !ok || !m.SupportsMIG() {
		t.Fatal("A100-80GB: no MIG geometry")
	}
	return m.MIG
}

// create asks the simulated driver for a GPU instance of the catalog
// profile at start, with the profile's placement size (or size).
func create(t *testing.T, g *GPU, profile string, start, size int) (nvml.GpuInstance, nvml.Return) {
	t.Helper()
	p := g.spec.Profiles[g.spec.ProfileIndex(profile)]
	info, ret := g.GetGpuInstanceProfileInfo(profileID(g.spec, p))
	if ret != nvml.SUCCESS {
		t.Fatalf("%s: profile info: %v", profile, ret)
	}
	if size == 0 {
		size = p.MemorySlices
	}
	return g.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
}

// The driver answers as NVML documents: a start the profile does not
// allow, a taken slice and a second +me instance are refused with
// ERROR_INSUFFICIENT_RESOURCES, a placement of the wrong size with
// ERROR_INVALID_ARGUMENT; a GPU instance with a compute instance, or a
// compute instance a process uses, cannot be destroyed (ERROR_IN_USE).
func TestDriverFollowsTheCatalog(t *testing.T) {
	g := NewGPU(a100(t), "GPU-a", 0)
	for _, c := range []struct {
		profile     string
		start, size int
		want        nvml.Return
	}{
		{"3g.40gb", 2, 0, nvml.ERROR_INSUFFICIENT_RESOURCES}, // starts 0 and 4 only
		{"3g.40gb", 4, 3, nvml.ERROR_INVALID_ARGUMENT},       // size 4, not go-nvml mock's 3
		{"3g.40gb", 4, 0, nvml.SUCCESS},
		{"2g.20gb", 4, 0, nvml.ERROR_INSUFFICIENT_RESOURCES}, // slices 4-5 taken
		{"1g.10gb+me", 0, 0, nvml.SUCCESS},
		{"1g.10gb+me", 1, 0, nvml.ERROR_INSUFFICIENT_RESOURCES}, // one set of media engines
		{"1g.10gb", 1, 0, nvml.SUCCESS},
	} {
		if _, ret := create(t, g, c.profile, c.start, c.size); ret != c.want {
			t.Errorf("%s@%d size %d: %v, want %v", c.profile, c.start, c.size, ret, c.want)
		}
	}
	if l := g.Layout(); l != "1g.10gb+me@0 1g.10gb@1 3g.40gb@4" {
		t.Fatalf("layout %q", l)
	}
	gi, ret := g.GetGpuInstanceById(3)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ci, ret := gi.CreateComputeInstance(&ciInfo)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Errorf("destroying a GPU instance with a compute instance: %v", ret)
	}
	g.SetBusy(1, true)
	if ret := ci.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Errorf("destroying a busy compute instance: %v", ret)
	}
	g.SetBusy(1, false)
	if ci.Destroy() != nvml.SUCCESS || gi.Destroy() != nvml.SUCCESS {
		t.Error("destroy after the process left")
	}
	if l := g.Layout(); l != "1g.10gb+me@0 3g.40gb@4" {
		t.Errorf("layout %q", l)
	}
}
