package migctl

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/test/gputest"
)

// TestCatalogMatchesThisGPU reads GPU 0's MIG GPU-instance profiles and
// their possible placements from the real NVML (read-only queries: nothing
// is created and the MIG mode is not touched) and compares them with the
// catalog's entry for the model: every profile NVML offers is in the catalog
// with the same compute slices, placement size, start slots, SM count,
// instance count and memory, and every catalog profile exists on the GPU.
// It also checks that profileIDs maps each catalog profile to the NVML
// profile of that name, which is what Create asks NVML for.
func TestCatalogMatchesThisGPU(t *testing.T) {
	gputest.Require(t, "MIG support (MIG mode may be off)")
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("nvmlInit: %v", nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0: %v", nvml.ErrorString(ret))
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0 name: %v", nvml.ErrorString(ret))
	}
	current, pending, ret := dev.GetMigMode()
	t.Logf("GPU 0: %q, MIG mode current=%d pending=%d (%s)", name, current, pending, nvml.ErrorString(ret))
	m, ok := catalog.Default().Lookup(name)
	if !ok {
		t.Fatalf("the catalog has no model for %q", name)
	}
	if !m.SupportsMIG() {
		t.Skipf("%s: the catalog lists no MIG profiles", m.Name)
	}
	type found struct {
		id       int
		info     nvml.GpuInstanceProfileInfo_v2
		size     int
		starts   []int
		placeErr string
	}
	onGPU := map[string]found{}
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := dev.GetGpuInstanceProfileInfoV(id).V2()
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // the GPU has no profile of this id
		}
		if ret != nvml.SUCCESS {
			t.Fatalf("GetGpuInstanceProfileInfoV(%d): %s", id, nvml.ErrorString(ret))
		}
		pname := strings.TrimPrefix(cString(info.Name[:]), "MIG ")
		f := found{id: id, info: info, size: -1}
		v1, ret := dev.GetGpuInstanceProfileInfo(id)
		if ret == nvml.SUCCESS {
			var places []nvml.GpuInstancePlacement
			places, ret = dev.GetGpuInstancePossiblePlacements(&v1)
			for _, p := range places {
				f.starts = append(f.starts, int(p.Start))
				f.size = int(p.Size)
			}
		}
		if ret != nvml.SUCCESS {
			f.placeErr = nvml.ErrorString(ret)
		}
		slices.Sort(f.starts)
		t.Logf("NVML profile %d %-12s slices=%d SMs=%d instances=%d memory=%d MB size=%d starts=%v %s",
			id, pname, info.SliceCount, info.MultiprocessorCount, info.InstanceCount, info.MemorySizeMB, f.size, f.starts, f.placeErr)
		onGPU[pname] = f
	}
	if len(onGPU) == 0 {
		t.Skipf("NVML lists no MIG GPU-instance profiles on %q (MIG mode current=%d)", name, current)
	}
	for _, p := range m.MIG.Profiles {
		f, ok := onGPU[p.Name]
		if !ok {
			t.Errorf("catalog profile %s of %s: not offered by this GPU (NVML offers %v)", p.Name, m.Name, keysOf(onGPU))
			continue
		}
		delete(onGPU, p.Name)
		check := func(what string, catalogValue, nvmlValue any) {
			if fmt.Sprint(catalogValue) != fmt.Sprint(nvmlValue) {
				t.Errorf("%s %s: catalog %s %v, NVML %v", m.Name, p.Name, what, catalogValue, nvmlValue)
			}
		}
		check("compute slices", p.ComputeSlices, f.info.SliceCount)
		check("SM count", p.SMCount, f.info.MultiprocessorCount)
		check("max instances", p.MaxInstances, f.info.InstanceCount)
		if f.placeErr == "" {
			check("placement size", p.MemorySlices, f.size)
			check("starts", p.Starts, f.starts)
		}
		// NVML reports memory in MB that are MiB in practice; the catalog
		// carries nvidia-smi's figure. Allow 1 % for rounding.
		if d := float64(p.MemoryMiB) - float64(f.info.MemorySizeMB); d > 0.01*float64(p.MemoryMiB) || -d > 0.01*float64(p.MemoryMiB) {
			t.Errorf("%s %s: catalog memory %d MiB, NVML %d MB", m.Name, p.Name, p.MemoryMiB, f.info.MemorySizeMB)
		}
		gi, _, err := profileIDs(m.MIG, p)
		if err != nil {
			t.Errorf("%s %s: %v", m.Name, p.Name, err)
		} else if gi != f.id {
			t.Errorf("%s %s: profileIDs gives NVML profile %d, the GPU names profile %d %s", m.Name, p.Name, gi, f.id, p.Name)
		}
	}
	for pname := range onGPU {
		t.Errorf("%s: NVML offers profile %s, the catalog does not list it", m.Name, pname)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cString is NVML's NUL-terminated char array as a string.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
