package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	tinyQoSPods = "../../../tracesim/testdata/timed_pods_qos.csv"
	lsBEQueues  = "../../../tracesim/testdata/queues-ls-be.yaml"
)

// TestSimDynamicQueues: LS and BE as two queues with preemption and gangs:
// the per-queue tables, series_queues.csv and one plot per trace and seed.
func TestSimDynamicQueues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := run(t, "sim", "dynamic", "--trace", tinyQoSPods, "--nodes", tinyNodes, "--policy", "bestfit,tessera", "--seeds", "1-2",
		"--queues", lsBEQueues, "--preemption", "--gangs", "--tune", "3", "--load", "2.5", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Means over seeds", "Per queue:", "| timed_pods_qos | bestfit | 1 | ls |", "| timed_pods_qos | tessera | 2 | be |",
		"Per queue, means over seeds:", "| timed_pods_qos | tessera | be | 2 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"dynamic.json", "dynamic.md", "series.csv", "series_queues.csv", "dynamic_timed_pods_qos_seed1.svg", "dynamic_timed_pods_qos_seed2.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "dynamic.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct {
		Pods       int  `json:"pods"`
		Gangs      bool `json:"gangs"`
		Preemption bool `json:"preemption"`
		Queues     []struct {
			Queue string `json:"queue"`
			Pods  int    `json:"pods"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d runs in dynamic.json, want 4", len(rs))
	}
	for _, r := range rs {
		if !r.Gangs || !r.Preemption || len(r.Queues) != 2 || r.Queues[0].Queue != "ls" || r.Queues[1].Queue != "be" || r.Queues[0].Pods+r.Queues[1].Pods != r.Pods {
			t.Errorf("run %+v: want gangs, preemption, queues ls and be holding every pod", r)
		}
	}
}

func TestSimDynamicQueueFlagValidation(t *testing.T) {
	base := []string{"sim", "dynamic", "--trace", tinyQoSPods, "--nodes", tinyNodes}
	dir := t.TempDir()
	over := filepath.Join(dir, "over.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	only := filepath.Join(dir, "only.yaml")
	for path, text := range map[string]string{
		over: "queues:\n- name: ls\n  qos: [LS]\n  guaranteed: 500\n- name: be\n  qos: [BE]\n",
		bad:  "queues:\n- name: ls\n  qos: [LS]\n  guaranteed: plenty\n",
		only: "queues:\n- name: ls\n  qos: [LS]\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--preemption"}, "--preemption: needs --queues"},
		{[]string{"--min-runtime", "-5"}, "--min-runtime: must be >= 0 simulated seconds, got -5"},
		{[]string{"--queues", filepath.Join(dir, "missing.yaml")}, "--queues: cannot read"},
		{[]string{"--queues", bad}, `queues[0].guaranteed: must be a number of GPUs such as 4 or 0.5, or a share of the cluster such as 30%, got "plenty"`},
		{[]string{"--queues", over}, "the guarantees add up to 500 GPUs, more than the cluster's 40"},
		{[]string{"--queues", only}, `pod tiny-qos-000: no queue takes qos "BE"`},
	} {
		_, errOut, code := run(t, append(append([]string{}, base...), tc.extra...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.extra, code, errOut, tc.want)
		}
	}
}
