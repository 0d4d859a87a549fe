package tracesim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

func loadTiny(t *testing.T) (*placement.Cluster, []placement.Pod) {
	t.Helper()
	c, err := LoadNodes("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadPods("testdata/pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	return c, pods
}

func TestLoadByHeaderName(t *testing.T) {
	c, pods := loadTiny(t)
	if len(c.Nodes) != 9 || c.TotalGPUMilli() != 40000 || c.Nodes[0].Name != "tiny-node-00" || c.Nodes[0].GPUs[0].Model != "A" {
		t.Fatalf("nodes: %d nodes, %d milli, first %+v", len(c.Nodes), c.TotalGPUMilli(), c.Nodes[0])
	}
	if len(pods) != 80 {
		t.Fatalf("pods: %d, want 80", len(pods))
	}
	var share, spec, cpuOnly int
	for _, p := range pods {
		switch {
		case p.GPUCount() == 0:
			cpuOnly++
		case p.Sharing():
			share++
		}
		if len(p.GPU.Models) > 0 {
			spec++
		}
	}
	if share == 0 || spec == 0 || cpuOnly == 0 {
		t.Fatalf("want sharing, model-restricted and CPU-only pods; got %d, %d, %d", share, spec, cpuOnly)
	}
}

func TestLoadErrorsNameFileLineAndColumn(t *testing.T) {
	cases := []struct{ name, data, want string }{
		{"missing column", "name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", `bad.csv:1: missing column "gpu_milli"`},
		{"bad number", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\nq,x,1,1,1000\n", "bad.csv:3: column cpu_milli"},
		{"out of range", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1200\n", "bad.csv:2: column gpu_milli"},
		{"shared multi-GPU", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n", "sharing pods take one GPU"},
		{"empty", "", "empty file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := parseTable(strings.NewReader(tc.data), "bad.csv", "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
			if err == nil {
				_, err = podsFromTable(tab)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	tab, _ := parseTable(strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,2,\n"), "nodes.csv", "sn")
	if _, err := nodesFromTable(tab); err == nil || !strings.Contains(err.Error(), "nodes.csv:2: column model") {
		t.Fatalf("node without model: err = %v", err)
	}
	if _, err := LoadPods("testdata/absent.csv"); err == nil || !strings.Contains(err.Error(), "absent.csv") {
		t.Fatalf("absent file: err = %v", err)
	}
}

func TestArrivalsReachTune(t *testing.T) {
	c, pods := loadTiny(t)
	a := Arrivals(pods, c.TotalGPUMilli(), 1.3, 42)
	var total int64
	for _, p := range a {
		total += p.TotalGPUMilli()
	}
	target := int64(1.3 * float64(c.TotalGPUMilli()))
	if total > target || total < target-8000 {
		t.Fatalf("arrived GPU demand %d, want within 8 GPUs below %d", total, target)
	}
	if !reflect.DeepEqual(a, Arrivals(pods, c.TotalGPUMilli(), 1.3, 42)) {
		t.Fatal("same seed, different arrivals")
	}
	if reflect.DeepEqual(a, Arrivals(pods, c.TotalGPUMilli(), 1.3, 43)) {
		t.Fatal("different seeds, same arrivals")
	}
	small := Arrivals(pods, c.TotalGPUMilli(), 0.2, 1)
	total = 0
	for _, p := range small {
		total += p.TotalGPUMilli()
	}
	if total > c.TotalGPUMilli()/5 {
		t.Fatalf("tune 0.2: arrived %d, want at most %d", total, c.TotalGPUMilli()/5)
	}
}

func TestReplayEveryPolicy(t *testing.T) {
	c, pods := loadTiny(t)
	for _, name := range placement.Names() {
		cfg := Config{Trace: "tiny", Nodes: c, Pods: pods, Policy: name, Seed: 42, Tune: 1.3}
		r, err := Replay(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Curve) != 131 {
			t.Fatalf("%s: curve has %d points, want 131", name, len(r.Curve))
		}
		for _, p := range r.Curve {
			// One pod is up to 20% of this tiny cluster, so a percent bucket
			// without arrivals borrows its neighbours' (as the study does).
			if p.AllocatedPct > float64(p.ArrivedPct)+20 || p.AllocatedPct > 100 {
				t.Fatalf("%s: allocated %.2f%% at %d%% arrived", name, p.AllocatedPct, p.ArrivedPct)
			}
		}
		if r.FailedPods == 0 || r.AllocatedPctEnd <= 50 {
			t.Fatalf("%s: %d failed pods, %.1f%% allocated; want drops at 130%% and a fuller cluster", name, r.FailedPods, r.AllocatedPctEnd)
		}
		again, _ := Replay(context.Background(), cfg)
		r.Elapsed, again.Elapsed = 0, 0
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("%s: two replays with seed 42 differ", name)
		}
	}
	if _, err := Replay(context.Background(), Config{Nodes: c, Pods: pods, Policy: "nope", Tune: 1}); err == nil {
		t.Fatal("unknown policy accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Replay(ctx, Config{Nodes: c, Pods: pods, Policy: "fgd", Tune: 1}); err == nil {
		t.Fatal("cancelled replay succeeded")
	}
}

func TestMatrixAndOutputs(t *testing.T) {
	c, pods := loadTiny(t)
	m := Matrix{Nodes: c, Traces: []Trace{{Name: "pods", Pods: pods}}, Policies: []string{"fgd", "bestfit"}, Seeds: []uint64{42, 43}, Tune: 1.3, Parallel: 2}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Policy != "fgd" || res[0].Seed != 42 || res[3].Policy != "bestfit" || res[3].Seed != 43 {
		t.Fatalf("results out of order: %v %v", res[0].Policy, res[3].Policy)
	}
	pub, err := LoadPublished("testdata/published.csv", 1.3)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := pub.Lookup("pods", "fgd"); !ok || p.Seeds != 2 || p.AtEnd != 95 {
		t.Fatalf("published fgd = %+v, %v; want 2 seeds averaging 95", p, ok)
	}
	rows := Table(res, m.Policies, pub)
	if len(rows) != 2 || rows[0].Policy != "fgd" || !rows[0].HavePublished || rows[0].Seeds != 2 {
		t.Fatalf("rows = %+v", rows)
	}
	dir := t.TempDir()
	var sb strings.Builder
	if err := WriteTable(&sb, rows); err != nil || !strings.Contains(sb.String(), "published at end") {
		t.Fatalf("table: %v\n%s", err, sb.String())
	}
	f, _ := os.Create(filepath.Join(dir, "summary.json"))
	if err := WriteSummaryJSON(f, res); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var got []map[string]any
	if err := json.Unmarshal(data, &got); err != nil || len(got) != 4 {
		t.Fatalf("summary.json: %v, %d entries", err, len(got))
	}
	for _, k := range []string{"trace", "policy", "seed", "allocated_pct_at_100", "allocated_pct_at_end", "failed_pods", "failed_gpu_request_pct"} {
		if _, ok := got[0][k]; !ok {
			t.Fatalf("summary.json lacks %q", k)
		}
	}
	for _, name := range []string{"allocation.png", "allocation.svg"} {
		if err := WritePlot(filepath.Join(dir, name), res); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", name, err)
		}
	}
	sb.Reset()
	if err := WriteCurvesCSV(&sb, res); err != nil || strings.Count(sb.String(), "\n") != 1+4*131 {
		t.Fatalf("curves.csv: %v, %d lines", err, strings.Count(sb.String(), "\n"))
	}
}
