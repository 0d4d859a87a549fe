package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimVariantWritesATrace(t *testing.T) {
	out := filepath.Join(t.TempDir(), "variant.csv")
	if _, errOut, code := run(t, "sim", "variant", "--trace", tinyPods, "--nodes", tinyNodes, "--cpu-only", "2", "--pinned", "1", "--seed", "5", "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The variant replays like any trace.
	if _, errOut, code := run(t, "sim", "--trace", out, "--nodes", tinyNodes, "--policy", "default", "--seeds", "1", "-o", t.TempDir()); code != 0 {
		t.Fatalf("replaying the variant: exit %d: %s\n%s", code, errOut, data)
	}
	stdout, _, code := run(t, "sim", "variant", "--trace", tinyPods, "--nodes", tinyNodes, "--cpu-only", "2", "--pinned", "1", "--seed", "5")
	if code != 0 || stdout != string(data) {
		t.Fatalf("standard output (exit %d) differs from -o's file with the same seed:\n%s\nvs\n%s", code, stdout, data)
	}
}

func TestSimVariantFlagValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", tinyNodes}, "--trace: required"},
		{[]string{"--trace", tinyPods, "--cpu-only", "-1"}, "--cpu-only: must be 0 to 100 (a multiple of the trace's CPU-only pods), got -1"},
		{[]string{"--trace", tinyPods, "--nodes", tinyNodes, "--pinned", "2"}, "--pinned: must be 0 to 1 (a share of the GPU pods), got 2"},
		{[]string{"--trace", tinyPods, "--pinned", "0.5"}, "--nodes: required with --pinned"},
		{[]string{"--trace", "missing.csv"}, `--trace: cannot read "missing.csv"`},
	}
	for _, tc := range cases {
		_, errOut, code := run(t, append([]string{"sim", "variant"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
