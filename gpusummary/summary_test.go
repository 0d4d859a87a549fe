package gpusummary

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
)

func models(r Report) string {
	var s []string
	for _, row := range r.Rows {
		s = append(s, row.Model)
	}
	return strings.Join(s, ",")
}

func TestBuildCatalogOnly(t *testing.T) {
	cat := catalogtest.Small() // no model is Common
	tests := []struct {
		opt  Options
		want string
	}{
		{Options{}, ""},
		{Options{All: true}, "H100-PCIe,H100-SXM,H200,L4"},
		{Options{Filter: "h100"}, "H100-PCIe,H100-SXM"},
		{Options{Filter: "NVIDIA H200"}, "H200"},
	}
	for _, tc := range tests {
		rep, err := Build(cat, "", nil, tc.opt)
		if err != nil {
			t.Fatalf("%+v: %v", tc.opt, err)
		}
		if got := models(rep); got != tc.want {
			t.Errorf("%+v: rows %q, want %q", tc.opt, got, tc.want)
		}
		for _, r := range rep.Rows {
			if r.Total != nil || r.FreeCapacity != nil {
				t.Errorf("catalog-only row has counts: %+v", r)
			}
		}
	}
	if _, err := Build(cat, "", nil, Options{Filter: "L5"}); err == nil || !strings.Contains(err.Error(), "did you mean L4") {
		t.Errorf("unknown filter: err = %v", err)
	}
}

func TestBuildCountsInventory(t *testing.T) {
	cat := catalogtest.Small()
	nodes := []inventory.Node{{Name: "a", GPUs: []inventory.GPU{
		{Index: 0, Model: "H200", Health: inventory.Healthy},
		{Index: 1, Model: "H200", Health: inventory.Healthy, AllocatedMilli: 250},
		{Index: 2, Model: "H200", Health: inventory.Unhealthy},
		{Index: 3, Model: "", Product: "Mystery X1", Vendor: "NVIDIA", MemoryMiB: 1000, Health: inventory.Healthy, MIGMode: inventory.MIGUnsupported},
	}}}
	rep, err := Build(cat, "sim:test", nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := models(rep); got != "H200,Mystery X1" {
		t.Fatalf("rows %q", got)
	}
	h := rep.Rows[0]
	if *h.Total != 3 || *h.Free != 1 || *h.Unhealthy != 1 || *h.FreeCapacity != 1.75 || !h.InCatalog {
		t.Errorf("H200 row: total %d free %d unhealthy %d capacity %v", *h.Total, *h.Free, *h.Unhealthy, *h.FreeCapacity)
	}
	m := rep.Rows[1]
	if m.InCatalog || *m.Total != 1 || m.MemoryMiB != 1000 || m.MIG {
		t.Errorf("unknown-model row: %+v", m)
	}
	// A filter narrows inventory rows too; unknown products match by name.
	rep, err = Build(cat, "sim:test", nodes, Options{Filter: "mystery x1"})
	if err != nil || models(rep) != "Mystery X1" {
		t.Errorf("filter on product: %q, %v", models(rep), err)
	}
	// With an inventory, listed models absent from it count zero, not null.
	rep, _ = Build(cat, "sim:test", nodes, Options{All: true})
	for _, r := range rep.Rows {
		if r.Total == nil {
			t.Errorf("row %s has null total in an inventory report", r.Model)
		}
	}
}

func TestBuildPools(t *testing.T) {
	cat := catalogtest.Small()
	gpu := func(model string, milli int64, h inventory.Health) inventory.GPU {
		return inventory.GPU{Model: model, Health: h, AllocatedMilli: milli}
	}
	node := func(name string, gpus ...inventory.GPU) inventory.Node {
		for i := range gpus {
			gpus[i].Index = i
		}
		return inventory.Node{Name: name, GPUs: gpus}
	}
	nodes := []inventory.Node{
		node("t1", gpu("H200", 0, inventory.Healthy), gpu("H200", 500, inventory.Healthy)),
		node("t2", gpu("H200", 1000, inventory.Healthy), gpu("H200", 0, inventory.Unhealthy)),
		node("i1", gpu("L4", 250, inventory.Healthy), gpu("H200", 0, inventory.Healthy)),
		node("loose", gpu("L4", 0, inventory.Healthy)),
		node("cpu"),
	}
	pools := map[string]string{"t1": "train", "t2": "train", "i1": "infer", "loose": "", "cpu": "train"}
	tests := []struct {
		name string
		opt  Options
		want []PoolRow
	}{
		{"no pools", Options{}, nil},
		{"pools", Options{Pools: pools, PoolLabel: "tessera.io/pool"}, []PoolRow{
			{Pool: "infer", Labeled: true, Model: "H200", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
			{Pool: "infer", Labeled: true, Model: "L4", Nodes: 1, Total: 1, Free: 0, FreeCapacity: 0.75},
			{Pool: "train", Labeled: true, Model: "H200", Nodes: 2, Total: 4, Free: 1, Unhealthy: 1, FreeCapacity: 1.5},
			{Pool: "L4", Labeled: false, Model: "L4", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
		}},
		{"filtered", Options{Filter: "l4", Pools: pools, PoolLabel: "tessera.io/pool"}, []PoolRow{
			{Pool: "infer", Labeled: true, Model: "L4", Nodes: 1, Total: 1, Free: 0, FreeCapacity: 0.75},
			{Pool: "L4", Labeled: false, Model: "L4", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
		}},
	}
	for _, tc := range tests {
		rep, err := Build(cat, "kube:test", nodes, tc.opt)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.PoolLabel != tc.opt.PoolLabel {
			t.Errorf("%s: pool label %q", tc.name, rep.PoolLabel)
		}
		if len(rep.Pools) != len(tc.want) {
			t.Fatalf("%s: pools %+v, want %+v", tc.name, rep.Pools, tc.want)
		}
		for i := range tc.want {
			if rep.Pools[i] != tc.want[i] {
				t.Errorf("%s: pools[%d] = %+v, want %+v", tc.name, i, rep.Pools[i], tc.want[i])
			}
		}
	}
	// No pools given: the JSON keeps its v1 shape (no pools key).
	rep, _ := Build(cat, "sim:x", nodes, Options{})
	if rep.Pools != nil || rep.PoolLabel != "" {
		t.Errorf("report without pools: %+v", rep)
	}
}

// With a host daemon's use, each row sums its GPUs' use with measured and
// simulated figures apart, lists each GPU's, and counts the GPUs nothing
// measures (those the use map lacks included); without it the rows carry
// no use at all.
func TestBuildUse(t *testing.T) {
	cat := catalogtest.Small()
	i64 := func(v int64) *int64 { return &v }
	nodes := []inventory.Node{{Name: "h", GPUs: []inventory.GPU{
		{Index: 0, UUID: "GPU-m0", Model: "H200", Health: inventory.Healthy},
		{Index: 1, UUID: "GPU-m1", Model: "H200", Health: inventory.Healthy},
		{Index: 2, UUID: "GPU-s", Model: "H200", Health: inventory.Healthy},
		{Index: 3, UUID: "GPU-n", Model: "H200", Health: inventory.Healthy},
		{Index: 4, UUID: "GPU-l4", Model: "L4", Health: inventory.Healthy},
		{Index: 5, UUID: "GPU-gone", Model: "L4", Health: inventory.Healthy},
	}}}
	use := map[string]gpuuse.Use{
		"GPU-m0": {Source: gpuuse.Measured, BusyMilli: i64(250), MemoryUsedMiB: i64(1024)},
		"GPU-m1": {Source: gpuuse.Measured, BusyMilli: i64(500), MemoryUsedMiB: i64(2048)},
		"GPU-s":  {Source: gpuuse.Simulated, BusyMilli: i64(300)},
		"GPU-n":  gpuuse.NotMetered("no job runs on it"),
		"GPU-l4": gpuuse.NotMetered("no job runs on it"),
	}
	rep, err := Build(cat, "sim:test", nodes, Options{Use: use, Pools: map[string]string{"h": "p"}, PoolLabel: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.WithUse || models(rep) != "H200,L4" {
		t.Fatalf("report: withUse %v, rows %q", rep.WithUse, models(rep))
	}
	h := rep.Rows[0].Use
	if h == nil || h.Measured == nil || h.Simulated == nil {
		t.Fatalf("H200 use %+v: want measured and simulated apart", h)
	}
	if h.Measured.GPUs != 2 || *h.Measured.Busy != 0.75 || *h.Measured.MemoryUsedMiB != 3072 {
		t.Errorf("H200 measured %+v busy %v", *h.Measured, *h.Measured.Busy)
	}
	if h.Simulated.GPUs != 1 || *h.Simulated.Busy != 0.3 || h.Simulated.MemoryUsedMiB != nil {
		t.Errorf("H200 simulated %+v", *h.Simulated)
	}
	if h.NotMetered != 1 || h.Reason != "not metered: no job runs on it" {
		t.Errorf("H200 not metered %d, reason %q", h.NotMetered, h.Reason)
	}
	if n := len(rep.Rows[0].GPUs); n != 4 || rep.Rows[0].GPUs[2].UUID != "GPU-s" || rep.Rows[0].GPUs[2].Use.Source != gpuuse.Simulated {
		t.Errorf("H200 devices %+v", rep.Rows[0].GPUs)
	}
	// Two GPUs not metered for different reasons: the sum gives none.
	l := rep.Rows[1].Use
	if l.Measured != nil || l.Simulated != nil || l.NotMetered != 2 || l.Reason != "" {
		t.Errorf("L4 use %+v", l)
	}
	if g := rep.Rows[1].GPUs[1]; g.Use.Source != gpuuse.None || !strings.Contains(g.Use.Reason, "reports no use") {
		t.Errorf("GPU absent from the use map: %+v", g)
	}
	if p := rep.Pools[0]; p.Model != "H200" || p.Use == nil || p.Use.Measured.GPUs != 2 || p.Use.Simulated.GPUs != 1 || p.Use.NotMetered != 1 {
		t.Errorf("pool use %+v", p)
	}
	// All models listed: an absent one has an empty use sum, not none.
	rep, _ = Build(cat, "sim:test", nodes, Options{All: true, Use: use})
	for _, r := range rep.Rows {
		if r.Use == nil {
			t.Errorf("row %s has no use in a report with use", r.Model)
		}
	}
	// Without use (no host daemon, a cluster), the rows keep their v1 shape.
	rep, _ = Build(cat, "sim:test", nodes, Options{Pools: map[string]string{"h": "p"}, PoolLabel: "pool"})
	if rep.WithUse || rep.Rows[0].Use != nil || rep.Rows[0].GPUs != nil || rep.Pools[0].Use != nil {
		t.Errorf("report without use carries use: %+v", rep)
	}
}
