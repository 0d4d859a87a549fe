package tracesim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

const variantTrace = `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
a,8000,1000,1,1000,,LS
b,4000,1000,1,500,,BE
c,16000,1000,8,1000,,LS
cpu1,12000,2000,0,0,,BE
cpu2,32000,4000,0,0,,BE
`

func variantNodes() *placement.Cluster {
	return &placement.Cluster{Nodes: []placement.Node{
		placement.NewNode("t4", 104000, 400000, 2, "T4", 0),
		placement.NewNode("g2", 96000, 400000, 8, "G2", 0),
		placement.NewNode("g2b", 96000, 400000, 8, "G2", 0),
	}}
}

func writeVariant(t *testing.T, v Variant) []placement.Pod {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(variantTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteVariant(&buf, path, variantNodes(), v); err != nil {
		t.Fatalf("WriteVariant(%+v): %v", v, err)
	}
	tab, err := parseTable(&buf, "variant", "name")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podsFromTable(tab)
	if err != nil {
		t.Fatalf("the variant does not load as a trace: %v", err)
	}
	return pods
}

func TestVariantScalesCPUOnlyPods(t *testing.T) {
	for _, tt := range []struct {
		factor  float64
		cpuOnly int
	}{{1, 2}, {3, 6}, {2.5, 5}, {0.5, 1}, {0, 0}} {
		pods := writeVariant(t, Variant{CPUOnly: tt.factor, Seed: 7})
		var cpu, gpu int
		names := map[string]bool{}
		for _, p := range pods {
			if names[p.Name] {
				t.Fatalf("factor %v: pod name %s twice", tt.factor, p.Name)
			}
			names[p.Name] = true
			if p.GPUCount() == 0 {
				cpu++
				if !strings.HasPrefix(p.Name, "cpu") {
					t.Fatalf("factor %v: CPU-only pod %s is not a copy of one", tt.factor, p.Name)
				}
			} else {
				gpu++
			}
		}
		if cpu != tt.cpuOnly || gpu != 3 {
			t.Errorf("factor %v: %d CPU-only and %d GPU pods, want %d and 3", tt.factor, cpu, gpu, tt.cpuOnly)
		}
	}
}

func TestVariantPinsGPUPodsToModelsThatFit(t *testing.T) {
	pods := writeVariant(t, Variant{CPUOnly: 1, Pinned: 1, Seed: 3})
	for _, p := range pods {
		switch {
		case p.GPUCount() == 0 && len(p.GPU.Models) != 0:
			t.Errorf("CPU-only pod %s pinned to %v", p.Name, p.GPU.Models)
		case p.GPUCount() > 0 && len(p.GPU.Models) != 1:
			t.Errorf("GPU pod %s pinned to %v, want one model", p.Name, p.GPU.Models)
		case p.GPUCount() == 8 && p.GPU.Models[0] != "G2":
			t.Errorf("8-GPU pod pinned to %s, which has no 8-GPU node", p.GPU.Models[0])
		}
	}
	if none := writeVariant(t, Variant{CPUOnly: 1, Seed: 3}); len(none[0].GPU.Models) != 0 {
		t.Errorf("no pins asked, pod a pinned to %v", none[0].GPU.Models)
	}
}

func TestVariantIsReproducible(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(variantTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	out := func(seed uint64) string {
		var buf bytes.Buffer
		if err := WriteVariant(&buf, path, variantNodes(), Variant{CPUOnly: 4, Pinned: 0.5, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if first, again := out(9), out(9); first != again {
		t.Fatal("the same seed gave two different variants")
	}
	if out(9) == out(10) {
		t.Fatal("seeds 9 and 10 gave the same variant")
	}
}

func TestVariantRefusesBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(variantTrace+"huge,1000,1000,16,1000,,LS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		v    Variant
		want string
	}{
		{Variant{CPUOnly: -1}, "CPU-only factor -1: want 0 to 100"},
		{Variant{CPUOnly: 1, Pinned: 1.5}, "pinned share 1.5: want 0 to 1"},
		{Variant{CPUOnly: 1, Pinned: 1}, "pod huge asks 16 GPUs, more than any node of the cluster has"},
	} {
		err := WriteVariant(&bytes.Buffer{}, path, variantNodes(), tt.v)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("WriteVariant(%+v) = %v, want an error saying %q", tt.v, err, tt.want)
		}
	}
}

// TestTesseraBeatsFGDWhenCPUIsScarce replays a variant of the default
// openb trace with three times its CPU-only pods, where the workload asks
// more CPU per GPU than the cluster has: the default policy used to fall
// behind FGD there (docs/simulator.md, "When CPU is scarce").
func TestTesseraBeatsFGDWhenCPUIsScarce(t *testing.T) {
	nodes, _, dir := openbDefault(t)
	var buf bytes.Buffer
	if err := WriteVariant(&buf, filepath.Join(dir, "openb_pod_list_default.csv"), nodes, Variant{CPUOnly: 3, Seed: 1001}); err != nil {
		t.Fatal(err)
	}
	tab, err := parseTable(&buf, "cpux3", "name")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podsFromTable(tab)
	if err != nil {
		t.Fatal(err)
	}
	m := Matrix{Nodes: nodes, Traces: []Trace{{Name: "cpux3", Pods: pods}}, Policies: []string{"fgd", "tessera"}, Seeds: []uint64{42}, Tune: 1.3, Parallel: 2}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fgd, tess := res[0], res[1]
	t.Logf("cpux3 seed 42: fgd %.2f%%, tessera %.2f%% at the end", fgd.AllocatedPctEnd, tess.AllocatedPctEnd)
	if tess.AllocatedPctEnd <= fgd.AllocatedPctEnd {
		t.Errorf("tessera %.2f%% does not beat fgd %.2f%% with CPU scarce", tess.AllocatedPctEnd, fgd.AllocatedPctEnd)
	}
}
