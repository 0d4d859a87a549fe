package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	tinyNodes = "../../../tracesim/testdata/nodes.csv"
	tinyPods  = "../../../tracesim/testdata/pods.csv"
	tinyPub   = "../../../tracesim/testdata/published.csv"
)

func TestSimWritesOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "fgd,tessera", "--seeds", "42-43", "-o", dir, "--plot-format", "svg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "| pods | fgd | 2 |") || !strings.Contains(out, "| pods | tessera | 2 |") {
		t.Fatalf("table:\n%s", out)
	}
	if !strings.Contains(errOut, "100%") {
		t.Fatalf("no progress bar on stderr: %q", errOut)
	}
	for _, f := range []string{"curves.csv", "summary.json", "summary.md", "allocation.svg", "allocation_zoom.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "breakdown.md")); err == nil {
		t.Error("breakdown.md written without --breakdown")
	}
}

func TestSimBreakdown(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := run(t, "sim", "compare", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "tessera", "-q", "--breakdown"); code == 0 || !strings.Contains(errOut, "--breakdown: give -o/--output") {
		t.Fatalf("--breakdown without -o: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "tessera", "--seeds", "1-2", "-q", "--breakdown", "-o", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "breakdown.md"))
	if err != nil || !strings.Contains(string(data), "## pods / tessera (2 seeds)") {
		t.Fatalf("breakdown.md: %v\n%s", err, data)
	}
}

func TestSimCompareShowsPublished(t *testing.T) {
	out, errOut, code := run(t, "sim", "compare", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "bestfit,fgd", "--published", tinyPub, "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "published at end") || !strings.Contains(out, "95.00 |") {
		t.Fatalf("published numbers missing:\n%s", out)
	}
	if errOut != "" && strings.Contains(errOut, "simulating") {
		t.Fatalf("-q still drew progress: %q", errOut)
	}
}

func TestSimFlagValidation(t *testing.T) {
	base := []string{"sim", "--trace", tinyPods, "--nodes", tinyNodes, "-o", t.TempDir()}
	cases := []struct {
		extra []string
		want  string
	}{
		{[]string{"--tune", "0"}, "--tune: must be in (0, 10]"},
		{[]string{"--popularity", "1.5"}, "--popularity: must be in (0, 1]"},
		{[]string{"--parallel", "0"}, "--parallel: must be in [1, 256]"},
		{[]string{"--seeds", "9-3"}, "--seeds"},
		{[]string{"--policy", "magic"}, `--policy: unknown policy "magic"`},
		{[]string{"--plot-format", "gif"}, "--plot-format"},
	}
	for _, tc := range cases {
		_, errOut, code := run(t, append(append([]string{}, base...), tc.extra...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.extra, code, errOut, tc.want)
		}
	}
	if _, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes); code == 0 || !strings.Contains(errOut, "-o/--output") {
		t.Errorf("sim without -o: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "sim", "-o", t.TempDir(), "--trace", "missing.csv", "--nodes", tinyNodes); code == 0 || !strings.Contains(errOut, "missing.csv") {
		t.Errorf("missing trace: exit %d, %q", code, errOut)
	}
}

const tinyTimedPods = "../../../tracesim/testdata/timed_pods.csv"

func TestSimDynamicWritesOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := run(t, "sim", "dynamic", "--trace", tinyTimedPods, "--nodes", tinyNodes, "--policy", "bestfit,default", "--seeds", "1-2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"| timed_pods | bestfit | 1 |", "| timed_pods | tessera | 2 |", "Means over seeds", "| timed_pods | tessera | 2 | "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"dynamic.json", "dynamic.md", "series.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
}

// TestSimDynamicMIG: --mig replays every MIG setup by default with
// departures and adds the MIG table; what it does not model is refused.
func TestSimDynamicMIG(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := run(t, "sim", "dynamic", "--trace", tinyTimedPods, "--nodes", tinyNodes, "--mig", "a100-40gb", "--seeds", "1-2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"MIG, means over seeds ± standard deviation", "| slot frag % |", "| timed_pods | A100-40GB | share | fractional | 2 |", "| timed_pods | A100-40GB | share | tessera | 2 |", "| timed_pods | static-all-1g | 1 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "dynamic.json")); err != nil || !strings.Contains(string(b), `"not_whole_pct"`) {
		t.Errorf("dynamic.json lacks the MIG object: %v", err)
	}
	base := []string{"sim", "dynamic", "--trace", tinyTimedPods, "--nodes", tinyNodes, "--mig", "A100-40GB"}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--gangs"}, "--gangs: not modelled with --mig"},
		{[]string{"--queues", "../../../tracesim/testdata/queues-ls-be.yaml"}, "--queues: not modelled with --mig"},
		{[]string{"--policy", "bestfit"}, `--policy: with --mig, name MIG setups`},
		{[]string{"--mig-memory", "half"}, "--mig-memory: must be share or none"},
	} {
		_, errOut, code := run(t, append(append([]string{}, base...), tc.extra...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.extra, code, errOut, tc.want)
		}
	}
	if _, errOut, code := run(t, "sim", "dynamic", "--trace", tinyTimedPods, "--nodes", tinyNodes, "--mig", "T4"); code == 0 || !strings.Contains(errOut, "--mig: MIG variant: model T4 does not support MIG") {
		t.Errorf("--mig T4: exit %d, %q", code, errOut)
	}
}

func TestSimDynamicFlagValidation(t *testing.T) {
	base := []string{"sim", "dynamic", "--trace", tinyTimedPods, "--nodes", tinyNodes}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--load", "2", "--tune", "1.5"}, "--load: must be in (0, --tune = 1.5), got 2"},
		{[]string{"--compression", "-1"}, "--compression: must be > 0"},
		{[]string{"--period", "0"}, "--period: must be in (0, 3600] seconds, got 0"},
		{[]string{"--policy", "magic"}, `--policy: unknown policy "magic"`},
	} {
		_, errOut, code := run(t, append(append([]string{}, base...), tc.extra...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.extra, code, errOut, tc.want)
		}
	}
	if _, errOut, code := run(t, "sim", "dynamic", "--trace", tinyPods, "--nodes", tinyNodes); code == 0 || !strings.Contains(errOut, "creation_time") {
		t.Errorf("a pod list without creation_time: exit %d, %q", code, errOut)
	}
}

// TestSimMIG: --mig replays every setup by default, prints the MIG table
// and writes its outputs; --policy then names setups.
func TestSimMIG(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--mig", "a100-40gb", "--seeds", "42-43", "-q", "-o", dir, "--plot-format", "svg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, setup := range []string{"fractional", "static-all-1g", "static-all-balanced", "template", "first-fit", "tessera"} {
		if !strings.Contains(out, "| pods | A100-40GB | share | "+setup+" | 2 |") {
			t.Errorf("no row for %s:\n%s", setup, out)
		}
	}
	for _, f := range []string{"curves.csv", "summary.json", "summary.md", "allocation.svg", "allocation_zoom.svg", "mig.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	out, errOut, code = run(t, "sim", "compare", "--trace", tinyPods, "--nodes", tinyNodes, "--mig", "H100", "--mig-memory", "none", "--policy", "Template,tessera", "-q")
	if code != 0 || !strings.Contains(out, "| pods | H100-SXM | none | template | 1 |") || strings.Contains(out, "first-fit") {
		t.Errorf("two setups on H100: exit %d, %s\n%s", code, errOut, out)
	}
}

func TestSimMIGFlagValidation(t *testing.T) {
	base := []string{"sim", "--trace", tinyPods, "--nodes", tinyNodes, "-o", t.TempDir()}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--mig", "T4"}, "--mig: MIG variant: model T4 does not support MIG"},
		{[]string{"--mig", "A100-40GB", "--policy", "fgd"}, `--policy: with --mig, name MIG setups (fractional, static-all-1g, static-all-balanced, template, first-fit, tessera), got "fgd"`},
		{[]string{"--mig", "A100-40GB", "--mig-memory", "half"}, "--mig-memory: must be share or none"},
		{[]string{"--mig-memory", "none"}, "--mig-memory: needs --mig"},
		{[]string{"--mig", "A100-40GB", "--breakdown"}, "--breakdown: not defined for the MIG variant"},
		{[]string{"--mig", "A100-40GB", "--published", tinyPub}, "--published: the study published no MIG numbers"},
	} {
		_, errOut, code := run(t, append(append([]string{}, base...), tc.extra...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.extra, code, errOut, tc.want)
		}
	}
}
