package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bad --config stops `tessera up` before anything starts, naming the
// file, the field and what is allowed.
func TestUpRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		body, want string
	}{
		{"queues:\n  - name: research\n    weight: -1\n", "queues[0].weight: must be in [0, 2147483647] (0 means 1), got -1"},
		{"queues:\n  - name: research\n    guaranteed: {gpu: lots}\n", `queues[0].guaranteed.gpu: must be a number of GPUs such as 4 or 0.5, got "lots"`},
		{"queues:\n  - name: big\n    guaranteed: {gpu: 3}\n", "queues[0].guaranteed.gpu: must be at most this host's 2 GPUs, got 3"},
		{"queues:\n  - name: a\n    parent: b\n", `queue a: parent "b" is not defined`},
		{"preemption: {minRuntime: soon}\n", `preemption.minRuntime: must be a duration >= 0 such as 90s or 5m, got "soon"`},
		{"queuez: []\n", `unknown field "queuez"`},
	}
	for _, tt := range tests {
		path := writeTemp(t, "host.yaml", tt.body)
		code, _, errs := tessera("up", "--simulate", "2xH200", "--state-dir", dir, "--config", path)
		if code == 0 || !strings.Contains(errs, tt.want) {
			t.Errorf("up --config with %q: exit %d, stderr %q; want %q", tt.body, code, errs, tt.want)
		}
	}
	code, _, errs := tessera("up", "--simulate", "2xH200", "--state-dir", dir, "--config", filepath.Join(dir, "missing.yaml"))
	if code == 0 || !strings.Contains(errs, "--config: config ") || !strings.Contains(errs, "missing.yaml") {
		t.Errorf("missing config: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := tessera("up", "--simulate", "2xH200", "--state-dir", dir, "--preemption-min-runtime", "-1s"); code == 0 || !strings.Contains(errs, "--preemption-min-runtime: must be a duration >= 0") {
		t.Errorf("negative min runtime: exit %d, stderr %q", code, errs)
	}
}

// With configured queues, a job naming another queue is refused and
// nothing is queued; a configured queue and the default one work.
func TestRunUnknownQueueWithConfig(t *testing.T) {
	cfg := writeTemp(t, "host.yaml", "queues:\n  - name: research\n    guaranteed: {gpu: 1}\n    idleReclaimAfter: 2h\n")
	host := startUp(t, "2xH200", "--config", cfg).host
	code, _, errs := tessera(append(append([]string{"run"}, host...), "--queue", "nope", "--", "true")...)
	if code != 2 || !strings.Contains(errs, `--queue: queue "nope" is not configured; this daemon's queues are default, research`) {
		t.Errorf("unknown queue: exit %d, stderr %q", code, errs)
	}
	if jobs := psJobs(t, host); len(jobs) != 0 {
		t.Fatalf("an unknown queue queued %d jobs", len(jobs))
	}
	for _, q := range []string{"research", "default"} {
		if code, _, errs := tessera(append(append([]string{"run"}, host...), "--queue", q, "--gpu-fraction", "0.1", "--", "true")...); code != 0 {
			t.Errorf("queue %s: exit %d, stderr %q", q, code, errs)
		}
	}
	code, out, _ := tessera(append([]string{"queue", "--queues"}, host...)...)
	if code != 0 || !strings.Contains(out, "QUEUE") || !regexp.MustCompile(`(?m)^research +- +0 +1 +1 GPU +none +0 +0\.00 +0 +0 +2h0m0s$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^default \(auto\) +- +0 +1 +- +none +0 .* off$`).MatchString(out) {
		t.Errorf("queue --queues:\n%s", out)
	}
}

// A high-priority run stops a lower-priority one: the victim's run exits
// with the job's code and says why; tessera ps shows who preempted it.
// A restartable victim goes back to the queue instead.
func TestRunPreemptedAndRestartable(t *testing.T) {
	host := startUp(t, "1xH200", "--preemption-min-runtime", "0s").host
	gate := filepath.Join(t.TempDir(), "gate")
	wait := `echo started; while [ ! -e ` + gate + ` ]; do [ -d "$(dirname ` + gate + `)" ] || exit 99; sleep 0.02; done`
	type result struct {
		code int
		errs string
	}
	victim := make(chan result, 1)
	go func() {
		code, _, errs := tessera(append(append([]string{"run"}, host...), "--", "sh", "-c", wait)...)
		victim <- result{code, errs}
	}()
	waitForOutput(t, host, "job-1", "started")
	code, out, errs := tessera(append(append([]string{"run", "--detach", "--restartable", "--priority", "5"}, host...), "--", "sh", "-c", wait)...)
	if code != 0 {
		t.Fatalf("run --restartable: %d %s", code, errs)
	}
	mid := strings.TrimSpace(out)
	r := <-victim
	if r.code != 143 || !strings.Contains(r.errs, "job job-1 preempted by "+mid+" (priority 5) of queue default") || !strings.Contains(r.errs, "--restartable") {
		t.Errorf("preempted run: exit %d, stderr %q", r.code, r.errs)
	}
	waitForOutput(t, host, mid, "started")
	code, out, errs = tessera(append(append([]string{"run", "--detach", "--priority", "9"}, host...), "--", "sh", "-c", wait)...)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	high := strings.TrimSpace(out)
	waitForState(t, host, high, api.Running)
	waitForState(t, host, mid, api.Queued)
	code, out, _ = tessera(append([]string{"ps", "-a"}, host...)...)
	if code != 0 || !strings.Contains(out, "by "+mid+" (priority)") || !strings.Contains(out, "preempted 1x, last by "+high+" (priority); restartable") {
		t.Errorf("ps -a:\n%s", out)
	}
	code, out, _ = tessera(append([]string{"queue"}, host...)...)
	if code != 0 || !strings.Contains(out, "re-queued after preemption by "+high) {
		t.Errorf("queue:\n%s", out)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitForState(t, host, mid, api.Succeeded)
}

// waitForOutput waits until the job has printed want (so it runs, past
// its supervisor's setup).
func waitForOutput(t *testing.T, host []string, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, out, _ := tessera(append([]string{"logs", id}, host...)...); strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s to print %q", id, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitForState(t *testing.T, host []string, id string, want api.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, j := range psJobs(t, host) {
			if j.ID == id && j.State == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s to be %s", id, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `tessera run --mig` on a simulated host whose H200 is in MIG mode with
// its layout managed by Tessera: the job sees the instance created for it
// (MIG-<GPU UUID>/<start slot>).
func TestRunMIG(t *testing.T) {
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte("nodes: [{name: h, gpus: 1xH200, overrides: [{index: 0, migManaged: true}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := startUp(t, nodes).host
	code, out, errs := tessera(append(append([]string{"run", "--mig", "1g.18gb"}, host...), "--", "sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $TESSERA_MIG_PROFILES"`)...)
	if code != 0 || !strings.HasPrefix(out, "MIG-GPU-") || !strings.Contains(out, "/") || !strings.HasSuffix(out, " 1g.18gb\n") {
		t.Errorf("run --mig: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--mig", "1g.10gb"}, "--mig: must be a MIG profile this host's GPUs in MIG mode offer (H200 has 1g.18gb"},
		{[]string{"--mig", "9g.1tb"}, `--mig: must be a MIG profile this host's GPUs in MIG mode offer (H200 has 1g.18gb`},
		{[]string{"--mig", "1g.18gb", "--gpu-fraction", "0.5"}, "--mig: must be empty when --gpu-fraction or --gpu-limit is set"},
	} {
		code, _, errs := tessera(append(append(append([]string{"run"}, host...), tt.args...), "--", "true")...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("run %v: exit %d, stderr %q; want %q", tt.args, code, errs, tt.want)
		}
	}
}
