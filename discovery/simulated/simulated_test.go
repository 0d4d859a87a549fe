package simulated

import (
	"context"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/inventory"
)

func TestFromSpec(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		spec     string
		models   []string
		topology string // expected link kind between GPU 0 and 1
	}{
		{"8xH200", repeat("H200", 8), "nvlink"},
		{"H200", []string{"H200"}, ""},
		{"2XL4", repeat("L4", 2), "pcie"},
		{"2*h100", repeat("H100-SXM", 2), "nvlink"},
		{"2xH100-PCIe", repeat("H100-PCIe", 2), "nvlink"},
		{"4xH100-PCIe", repeat("H100-PCIe", 4), "nvlink"},
		{"2xH200+2xL4", append(repeat("H200", 2), repeat("L4", 2)...), "pcie"},
		{" 1xNVIDIA H200 + 1xL4 ", []string{"H200", "L4"}, "pcie"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			src, err := FromSpec(tc.spec, cat)
			if err != nil {
				t.Fatalf("FromSpec: %v", err)
			}
			nodes, err := src.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != 1 {
				t.Fatalf("got %d nodes, want 1", len(nodes))
			}
			n := nodes[0]
			if err := n.Validate(); err != nil {
				t.Fatalf("invalid node: %v", err)
			}
			var got []string
			for _, g := range n.GPUs {
				got = append(got, g.Model)
				if g.Health != inventory.Healthy || g.MemoryMiB <= 0 || !strings.HasPrefix(g.UUID, "GPU-") {
					t.Errorf("GPU %d: %+v", g.Index, g)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.models, ",") {
				t.Errorf("models = %v, want %v", got, tc.models)
			}
			if len(n.GPUs) > 1 {
				l := n.LinkBetween(0, 1)
				kind := "pcie"
				if l.NVLinks > 0 {
					kind = "nvlink"
				}
				if kind != tc.topology {
					t.Errorf("link 0-1 = %+v, want %s", l, tc.topology)
				}
			}
		})
	}
}

func TestTopologyPresets(t *testing.T) {
	cat := catalogtest.Small()
	n, err := buildNode("n", "4xH100-PCIe", TopologyAuto, cat)
	if err != nil {
		t.Fatal(err)
	}
	// Bridged pairs: 0-1 and 2-3 have NVLink, 1-2 do not and cross NUMA nodes.
	if n.LinkBetween(0, 1).NVLinks != 12 || n.LinkBetween(2, 3).NVLinks != 12 || n.LinkBetween(1, 2).NVLinks != 0 {
		t.Errorf("pairs topology wrong: %+v", n.Links)
	}
	if n.LinkBetween(1, 2).PCIe != inventory.PCIeSystem || n.GPUs[1].NUMANode != 0 || n.GPUs[2].NUMANode != 1 {
		t.Errorf("NUMA layout wrong: %+v", n)
	}
	if _, err := buildNode("n", "2xL4", TopologyNVSwitch, cat); err == nil || !strings.Contains(err.Error(), "needs an NVLink model") {
		t.Errorf("nvswitch on L4: err = %v", err)
	}
	n, err = buildNode("n", "4xH200", TopologyNone, cat)
	if err != nil || len(n.Links) != 0 || n.GPUs[3].NUMANode != 0 {
		t.Errorf("none topology: %+v, %v", n, err)
	}
}

func TestSpecErrors(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct{ spec, want string }{
		{"", "GPU spec is empty"},
		{"8xH2000", `unknown GPU model "H2000"; did you mean H200`},
		{"8xFOO", `unknown GPU model "FOO"`},
		{"0xH200", "count must be in [1, 64]"},
		{"65xH200", "count must be in [1, 64]"},
		{"8x", "model name is missing"},
		{"8", "expected COUNTxMODEL"},
		{"8yH200", "expected COUNTxMODEL"},
		{"8xH200+", "empty term"},
		{"40xH200+40xL4", "a node holds at most 64 GPUs"},
		{"99999999999999999999xH200", "count must be in [1, 64]"},
	}
	for _, tc := range tests {
		_, err := FromSpec(tc.spec, cat)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSpec(%q) error = %v, want one containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestParseFile(t *testing.T) {
	cat := catalogtest.Small()
	nodes, err := Parse([]byte(`
nodes:
- name: hgx
  replicas: 2
  gpus: 8xH200
  cpu: "192"
  memory: 2Ti
  overrides:
  - index: 3
    health: Unhealthy
    healthReason: "XID 79"
    memoryUsed: 10Gi
    allocated: "0.5"
  - index: 4
    migInstances: [1g.18gb, 1g.18gb]
  - index: 5
    migInstances: [1g.18gb@4, 1g.18gb]
    migManaged: true
  - index: 6
    migManaged: true
- name: edge
  gpus: 2xL4
  topology: none
`), cat)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || nodes[0].Name != "hgx-0" || nodes[1].Name != "hgx-1" || nodes[2].Name != "edge" {
		t.Fatalf("nodes = %v", names(nodes))
	}
	g := nodes[1].GPUs[3]
	if g.Health != inventory.Unhealthy || g.MemoryUsedMiB != 10240 || g.AllocatedMilli != 500 || g.HealthReason != "XID 79" {
		t.Errorf("override not applied: %+v", g)
	}
	if m := nodes[0].GPUs[4]; m.MIGMode != inventory.MIGEnabled || len(m.MIGInstances) != 2 || m.MIGInstances[0].MemoryMiB != 16384 ||
		*m.MIGInstances[0].Start != 0 || *m.MIGInstances[1].Start != 1 || m.MIGManaged {
		t.Errorf("MIG override not applied: %+v", m)
	}
	if m := nodes[0].GPUs[5]; !m.MIGManaged || len(m.MIGInstances) != 2 || *m.MIGInstances[0].Start != 4 || *m.MIGInstances[1].Start != 0 {
		t.Errorf("MIG layout with starts not applied: %+v", m)
	}
	if m := nodes[0].GPUs[6]; !m.MIGManaged || m.MIGMode != inventory.MIGEnabled || len(m.MIGInstances) != 0 {
		t.Errorf("managed MIG GPU not applied: %+v", m)
	}
	if nodes[0].CPUMilli != 192000 || nodes[0].MemoryMiB != 2<<20 {
		t.Errorf("cpu/memory = %d/%d", nodes[0].CPUMilli, nodes[0].MemoryMiB)
	}
	if nodes[0].GPUs[0].UUID == nodes[1].GPUs[0].UUID {
		t.Error("replicas share GPU UUIDs")
	}
}

func TestParseFileErrors(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct{ yaml, want string }{
		{`nodes: []`, "nodes: must list at least one node"},
		{`nodes: [{gpus: 8xH200}]`, "nodes[0]: name: must not be empty"},
		{`nodes: [{name: a, gpus: 8xH200, colour: red}]`, `unknown field "colour"`},
		{`nodes: [{name: a, gpus: 8xH2000}]`, `nodes[0]: gpus: GPU spec "8xH2000": unknown GPU model "H2000"`},
		{`nodes: [{name: a, gpus: 2xH200, replicas: -1}]`, "replicas: must be in [1, 100000], got -1"},
		{`nodes: [{name: a, gpus: 2xH200, cpu: lots}]`, "cpu: must be a number of cores"},
		{`nodes: [{name: a, gpus: 2xH200, memory: 2TB}]`, "memory: must be a size"},
		{`nodes: [{name: a, gpus: 2xH200, topology: ring}]`, `topology must be one of auto, nvswitch, pairs, pcie, none; got "ring"`},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 2}]}]`, "overrides[0]: index: must be in [0, 1], got 2"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, health: Sick}]}]`, "health: must be Healthy, Unhealthy or Unknown"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, memoryUsed: 200Gi}]}]`, "memoryUsed: must be a size in [0, 143771Mi]"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, allocated: "1.5"}]}]`, "allocated: must be a share in [0, 1]"},
		{`nodes: [{name: a, gpus: 2xL4, overrides: [{index: 0, migInstances: [1g.18gb]}]}]`, "does not support MIG"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, migInstances: [2g.35gb]}]}]`, `"2g.35gb" is not a H200 profile`},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, migInstances: [7g.141gb, 1g.18gb]}]}]`, "no free start for 1g.18gb beside [7g.141gb@0]"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, migInstances: [7g.141gb@2]}]}]`, `"7g.141gb@2": 7g.141gb cannot start at memory slice 2 (valid starts: {0})`},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, migInstances: [1g.18gb@5, 7g.141gb@0]}]}]`, "overlaps memory slices {5}"},
		{`nodes: [{name: a, gpus: 2xH200, overrides: [{index: 0, migInstances: [1g.18gb@x]}]}]`, `the start after @ must be a memory slice number, got "x"`},
		{`nodes: [{name: a, gpus: 2xL4, overrides: [{index: 0, migManaged: true}]}]`, "does not support MIG"},
		{`nodes: [{name: a, gpus: 2xH200, links: [{a: 0, b: 5}]}]`, "links[0] joins GPUs 0 and 5"},
		{`nodes: [{name: a, gpus: 1xL4}, {name: a, gpus: 1xL4}]`, `node name "a" is used twice`},
		{`nodes: {`, "parse simulated cluster"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.yaml), cat)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s)\n got: %v\nwant: %s", tc.yaml, err, tc.want)
		}
	}
}

func TestDiscoverReturnsCopies(t *testing.T) {
	src, err := FromSpec("2xH200", catalogtest.Small())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := src.Discover(context.Background())
	a[0].GPUs[0].AllocatedMilli = 999
	b, _ := src.Discover(context.Background())
	if b[0].GPUs[0].AllocatedMilli != 0 {
		t.Fatal("Discover shares state between callers")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Discover(ctx); err == nil {
		t.Fatal("Discover ignores a cancelled context")
	}
}

// FuzzSpec checks that spec parsing never panics and that any accepted spec
// yields a valid node with at least one GPU.
func FuzzSpec(f *testing.F) {
	for _, s := range []string{"8xH200", "4xH100+2xL4", "H200", "x", "0x", "+", "64xL4", "1*h100-pcie"} {
		f.Add(s)
	}
	cat := catalogtest.Small()
	f.Fuzz(func(t *testing.T, spec string) {
		src, err := FromSpec(spec, cat)
		if err != nil {
			return
		}
		n := src.nodes[0]
		if len(n.GPUs) == 0 || len(n.GPUs) > MaxGPUsPerNode {
			t.Fatalf("spec %q gave %d GPUs", spec, len(n.GPUs))
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("spec %q gave an invalid node: %v", spec, err)
		}
	})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func names(ns []inventory.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}
