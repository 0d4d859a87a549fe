package tracesim

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateRecorded = flag.Bool("update-recorded", false, "rewrite testdata/static_summary_seed42.json from this code")

// TestStaticSummariesUnchanged: the static replay's summary.json for FGD and
// Tessera's default policy on every shared openb trace (seed 42, tune 1.3)
// is byte for byte the recorded one (elapsed time left out). Work on the scheduling cycle, the
// engine's purity or the policies' registry must not move it; a change that
// means to (a better policy) rewrites the file with -update-recorded and
// says so in docs/simulator.md.
func TestStaticSummariesUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every shared trace twice (tens of seconds); skipped with -short")
	}
	dir := openbDir(t)
	nodes, err := LoadNodes(filepath.Join(dir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "openb_pod_list_*.csv"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no pod lists in %s: %v", dir, err)
	}
	m := Matrix{Nodes: nodes, Policies: []string{"fgd", "tessera"}, Seeds: []uint64{42}, Tune: 1.3, Parallel: 2}
	for _, p := range paths {
		pods, err := LoadPods(p)
		if err != nil {
			t.Fatal(err)
		}
		m.Traces = append(m.Traces, Trace{Name: TraceName(p), Pods: pods})
	}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		r.Elapsed = 0 // the one field that is not a result
	}
	var got bytes.Buffer
	if err := WriteSummaryJSON(&got, res); err != nil {
		t.Fatal(err)
	}
	recorded := filepath.Join("testdata", "static_summary_seed42.json")
	if *updateRecorded {
		if err := os.WriteFile(recorded, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s (%d traces)", recorded, len(paths))
		return
	}
	want, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(g) && i < len(w); i++ {
			if g[i] != w[i] {
				t.Fatalf("summary differs from %s at line %d:\n got %s\nwant %s", recorded, i+1, g[i], w[i])
			}
		}
		t.Fatalf("summary differs from %s in length: %d lines, want %d", recorded, len(g), len(w))
	}
}
