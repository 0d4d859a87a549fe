package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/gpusummary"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestShowGPUsDefaultListsH200(t *testing.T) {
	out, _, code := run(t, "show-gpus")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "H200 ") {
		t.Fatalf("H200 missing from default list:\n%s", out)
	}
	def := strings.Count(out, "\n")
	all, _, code := run(t, "show-gpus", "-a")
	if code != 0 {
		t.Fatalf("-a exit %d", code)
	}
	if strings.Count(all, "\n") <= def {
		t.Fatalf("-a lists no more than the default:\n%s", all)
	}
}

func TestShowGPUsJSON(t *testing.T) {
	out, _, code := run(t, "show-gpus", "h200", "-o", "json", "--source", "sim:2xH200")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rep gpusummary.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if rep.SchemaVersion != gpusummary.SchemaVersion || rep.Source != "sim:2xH200" {
		t.Fatalf("report header = %+v", rep)
	}
	var h200 *gpusummary.Row
	for i := range rep.Rows {
		if !strings.HasPrefix(rep.Rows[i].Family, "H200") {
			t.Errorf("filter h200 let through %s", rep.Rows[i].Model)
		}
		if rep.Rows[i].Model == "H200" {
			h200 = &rep.Rows[i]
		}
	}
	if h200 == nil || h200.Total == nil || *h200.Total != 2 || *h200.Free != 2 || *h200.FreeCapacity != 2 {
		t.Fatalf("H200 row = %+v", h200)
	}
}

func TestShowGPUsYAMLAndTable(t *testing.T) {
	out, _, code := run(t, "show-gpus", "-o", "yaml", "--source", "sim:8xH200")
	if code != 0 || !strings.Contains(out, "schemaVersion: tessera.io/show-gpus/v1") || !strings.Contains(out, "total: 8") {
		t.Fatalf("yaml (exit %d):\n%s", code, out)
	}
	out, _, code = run(t, "show-gpus", "--source", "sim:8xH200")
	if code != 0 || !strings.Contains(out, "Inventory: sim:8xH200") {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}
}

func TestShowGPUsAutoFallsBackToSimulation(t *testing.T) {
	// No cluster: auto reads this host and says why.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	out, errOut, code := run(t, "show-gpus", "--source", "auto")
	if !strings.Contains(errOut, "note: --source auto: no Kubernetes cluster to read (no kubeconfig found") {
		t.Errorf("auto does not say why it reads this host:\n%s", errOut)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// This test runs without a GPU (CI never has one); with one, auto reads it.
	if strings.Contains(errOut, "using simulated GPUs (sim:8xH200)") != strings.Contains(out, "Inventory: sim:8xH200") {
		t.Fatalf("banner and inventory disagree:\n%s\n%s", errOut, out)
	}
}

func TestShowGPUsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"show-gpus", "h2000"}, `no GPU matches "h2000": unknown GPU model "h2000"; did you mean H200`},
		{[]string{"show-gpus", "-o", "xml"}, `-o/--output: must be one of table, json, yaml; got "xml"`},
		{[]string{"show-gpus", "--source", "sim:8xH2000"}, `unknown GPU model "H2000"`},
		{[]string{"show-gpus", "--source", "cloud"}, `source "cloud": must be one of auto, local, sim:SPEC, sim:FILE.yaml`},
		{[]string{"show-gpus", "--source", "local"}, "NVML is not available"},
		{[]string{"show-gpus", "--source", "sim:8xH200", "--context", "prod"}, `--context: applies only to --source kube or auto, got --source "sim:8xH200"`},
		{[]string{"show-gpus", "--kubeconfig", "/x"}, `--kubeconfig: applies only to --source kube or auto, got --source ""`},
		{[]string{"show-gpus", "--source", "kube", "--pool-label", "a b"}, `--pool-label: "a b" is not a valid label key`},
		{[]string{"show-gpus", "--source", "kube", "--kubeconfig", "/does/not/exist"}, "--kubeconfig /does/not/exist: stat /does/not/exist: no such file or directory"},
		// auto falls back when no cluster answers, not when the one named by flag cannot be used.
		{[]string{"show-gpus", "--source", "auto", "--kubeconfig", "/does/not/exist"}, "--kubeconfig /does/not/exist: stat"},
		{[]string{"show-gpus", "a", "b"}, `unexpected argument "b" (usage: tessera show-gpus [NAME] [flags])`},
		{[]string{"--log-level", "loud", "show-gpus"}, `--log-level: must be one of debug, info, warn, error; got "loud"`},
	}
	for _, tc := range tests {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range root.Commands() {
		if c.Short == "" {
			t.Errorf("command %q has no short help", c.Name())
		}
		out, _, code := run(t, c.Name(), "--help")
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%s --help: exit %d\n%s", c.Name(), code, out)
		}
	}
}
