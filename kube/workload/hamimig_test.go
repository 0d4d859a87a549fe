package workload

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/request"
)

// migCatalog is catalogtest.Small (an H200 with 1g.18gb and 7g.141gb) with
// an A100-80GB whose profiles tie on memory (1g.20gb, 2g.20gb) and have a
// media-extended twin (1g.10gb+me), so that the smallest profile differs
// between models.
func migCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	p := func(name string, mem int64, compute, slices int, starts ...int) catalog.MIGProfile {
		return catalog.MIGProfile{Name: name, MemoryMiB: mem, ComputeSlices: compute, MemorySlices: slices, MaxInstances: len(starts), Starts: starts}
	}
	a100 := catalog.Model{Vendor: catalog.NVIDIA, Name: "A100-80GB", Family: "A100", Aliases: []string{"NVIDIA A100-SXM4-80GB"}, Architecture: "Ampere",
		ComputeCapability: "8.0", MemoryMiB: 81920, SMCount: 108, PCIeGeneration: 4,
		MIG: &catalog.MIGSpec{ComputeSlices: 7, MemorySlices: 8, Profiles: []catalog.MIGProfile{
			p("1g.10gb+me", 9728, 1, 1, 0, 1, 2, 3, 4, 5, 6),
			p("1g.10gb", 9728, 1, 1, 0, 1, 2, 3, 4, 5, 6),
			p("2g.20gb", 19968, 2, 2, 0, 2, 4),
			p("1g.20gb", 19968, 1, 2, 0, 2, 4, 6),
			p("7g.80gb", 80896, 7, 8, 0),
		}}}
	cat, err := catalog.New(append(catalogtest.Small().Models(), a100))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// HAMi's vgpu-mode "mig" asks, per GPU, a MIG instance of the smallest
// profile holding nvidia.com/gpumem, on the models where that profile is
// the smallest.
func TestHAMiMIGMode(t *testing.T) {
	cat := migCatalog(t)
	mig := func(n int, profile string, models ...string) []ContainerRequest {
		return []ContainerRequest{{"c", request.GPU{Count: n, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: profile, Models: models}, HAMi, false}}
	}
	hami := func(ann map[string]string) map[string]string {
		a := map[string]string{HAMiAnnotationVGPUMode: "mig"}
		for k, v := range ann {
			a[k] = v
		}
		return a
	}
	ok := []struct {
		name string
		ann  map[string]string
		gpus string
		mib  string
		want []ContainerRequest
	}{
		// Ties on memory go to the fewest compute slices; +me is never picked.
		{"one model, a tie on memory", map[string]string{HAMiAnnotationUseType: "A100"}, "2", "12000", mig(2, "1g.20gb", "A100-80GB")},
		{"one model, the smallest", map[string]string{HAMiAnnotationUseType: "A100"}, "1", "8000", mig(1, "1g.10gb", "A100-80GB")},
		{"excluded types leave one model", map[string]string{HAMiAnnotationNoUseType: "A100"}, "1", "8000", mig(1, "1g.18gb", "H200")},
		// Only the H200 holds 100000 MiB: the others drop out.
		{"only one model holds it", nil, "1", "100000", mig(1, "7g.141gb", "H200")},
	}
	for _, tc := range ok {
		p := pod(hami(tc.ann), ctr{"c", map[string]string{ResourceNVIDIAGPU: tc.gpus, HAMiResourceMemory: tc.mib}})
		got, err := FromPod(p, cat)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	refused := []struct {
		name   string
		ann    map[string]string
		limits map[string]string
		want   string
	}{
		{"models disagree", nil, map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "8000"},
			`annotation nvidia.com/vgpu-mode of container c: "mig" with nvidia.com/gpumem 8000: the smallest MIG profile holding it differs between the GPU models Tessera knows (1g.10gb on A100-80GB; 1g.18gb on H200), and a Tessera request names one profile; name the models with annotation nvidia.com/use-gputype`},
		{"no profile holds it", map[string]string{HAMiAnnotationUseType: "A100,H200"}, map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "200000"},
			`resource nvidia.com/gpumem of container c: 200000Mi with annotation nvidia.com/vgpu-mode "mig": no MIG profile of the models nvidia.com/use-gputype allows (A100-80GB,H200) holds it (the largest: A100-80GB 80896Mi, H200 143360Mi)`},
		{"no MIG model allowed", map[string]string{HAMiAnnotationUseType: "L4"}, map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "1000"},
			`no MIG profile of the models nvidia.com/use-gputype allows (L4) holds it`},
		{"no gpumem", nil, map[string]string{ResourceNVIDIAGPU: "1"},
			`annotation nvidia.com/vgpu-mode of container c: "mig" needs resource nvidia.com/gpumem beside nvidia.com/gpu`},
		{"memory percentage", nil, map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemoryPercent: "50"},
			`resource nvidia.com/gpumem-percentage of container c: cannot be honoured with annotation nvidia.com/vgpu-mode "mig"`},
		{"Tessera's resource", nil, map[string]string{ResourceGPU: "1"},
			`annotation nvidia.com/vgpu-mode of container c: "mig" applies to HAMi's resources: ask nvidia.com/gpu with nvidia.com/gpumem`},
	}
	for _, tc := range refused {
		p := pod(hami(tc.ann), ctr{"c", tc.limits})
		if _, err := FromPod(p, cat); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.name, err, tc.want)
		}
	}
}
