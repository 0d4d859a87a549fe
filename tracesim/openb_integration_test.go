package tracesim

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

// openbDir finds the shared openb traces: $TESSERA_SHARED (the shared
// folder, or its traces/openb directly), else ../shared/traces/openb beside
// the repository root.
//
// Under the race detector it skips: the openb replays are single-threaded
// replays of thousands of pods (Matrix's worker pool, their one concurrency,
// is covered under -race by the tiny-trace matrices), and the detector makes
// them about fifteen times slower (237 s against 16 s for the package).
// make unit runs this package a second time without -race, so CI runs them.
func openbDir(t testing.TB) string {
	t.Helper()
	if raceDetector {
		t.Skip("replays the full openb traces, which the race detector slows about fifteenfold: run without -race (make unit does)")
	}
	var candidates []string
	if env := os.Getenv("TESSERA_SHARED"); env != "" {
		candidates = append(candidates, filepath.Join(env, "traces", "openb"), env)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				candidates = append(candidates, filepath.Join(dir, "..", "shared", "traces", "openb"))
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "openb_node_list_gpu_node.csv")); err == nil {
			return c
		}
	}
	t.Skipf("openb traces not found (looked in %v): set TESSERA_SHARED to the shared folder to run this integration test", candidates)
	return ""
}

// openbDefault loads the shared openb GPU node list and default pod list
// for a test that replays them (seconds): it skips under -short and where
// the traces are absent, and returns the traces' folder too.
func openbDefault(t *testing.T) (nodes *placement.Cluster, pods []placement.Pod, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: replays the openb traces (seconds); skipped with -short")
	}
	dir = openbDir(t)
	nodes, err := LoadNodes(filepath.Join(dir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if pods, err = LoadPods(filepath.Join(dir, "openb_pod_list_default.csv")); err != nil {
		t.Fatal(err)
	}
	return nodes, pods, dir
}

// TestOpenbIntegration is the one test that reads ../shared: it replays
// the default openb trace with seed 42 and checks that our FGD lands near
// the study's published mean and that Tessera's default policy beats it.
func TestOpenbIntegration(t *testing.T) {
	nodes, pods, dir := openbDefault(t)
	if len(nodes.Nodes) != 1213 || nodes.TotalGPUMilli() != 6212000 || len(pods) != 8152 {
		t.Fatalf("unexpected trace: %d nodes, %d GPU milli, %d pods", len(nodes.Nodes), nodes.TotalGPUMilli(), len(pods))
	}
	m := Matrix{Nodes: nodes, Traces: []Trace{{Name: "default", Pods: pods}}, Policies: []string{"fgd", "tessera"}, Seeds: []uint64{42}, Tune: 1.3, Parallel: 2}
	res, err := m.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fgd, tess := res[0], res[1]
	t.Logf("fgd: %.2f%% at 100%%, %.2f%% at end; tessera: %.2f%%, %.2f%%; %d arrivals", fgd.At(100), fgd.AllocatedPctEnd, tess.At(100), tess.AllocatedPctEnd, fgd.Pods)
	want := 95.39 // the study's FGD mean at 130% arrived (README table)
	if pub, err := LoadPublished(filepath.Join(dir, "expected", "analysis_allo_discrete.csv"), 1.3); err == nil {
		if p, ok := pub.Lookup("default", "fgd"); ok {
			want = p.AtEnd
		}
	}
	if math.Abs(fgd.AllocatedPctEnd-want) > 0.5 {
		t.Errorf("our FGD ends at %.2f%%, published %.2f%%: more than 0.5 points apart", fgd.AllocatedPctEnd, want)
	}
	if tess.AllocatedPctEnd <= fgd.AllocatedPctEnd {
		t.Errorf("tessera %.2f%% does not beat fgd %.2f%%", tess.AllocatedPctEnd, fgd.AllocatedPctEnd)
	}
}

// BenchmarkReplayDefault replays the default openb trace once per
// iteration (tune 1.3, seed 42) with FGD and with Tessera; it skips when
// the shared traces are absent.
func BenchmarkReplayDefault(b *testing.B) {
	dir := openbDir(b)
	nodes, err := LoadNodes(filepath.Join(dir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		b.Fatal(err)
	}
	pods, err := LoadPods(filepath.Join(dir, "openb_pod_list_default.csv"))
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range []string{"fgd", "tessera"} {
		b.Run(pol, func(b *testing.B) {
			for b.Loop() {
				if _, err := Replay(context.Background(), Config{Trace: "default", Nodes: nodes, Pods: pods, Policy: pol, Seed: 42, Tune: 1.3}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
