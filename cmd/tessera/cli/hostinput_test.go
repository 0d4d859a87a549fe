package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// engineWords are words of the placement engine and of Kubernetes that a
// host user never typed and should never read.
var engineWords = []string{"pod", "node", "feasible", "0m", "strconv", "Parse", "sim-0", "first rejection"}

// Bad input to `tessera run` on a one-H100 host: each message names the
// flag, the value and what this host allows, in host words, exits 2 (a
// usage error), and queues nothing.
func TestRunBadInputInHostWords(t *testing.T) {
	host := startUp(t, "1xH100").host
	tests := []struct {
		name string
		args []string
		want []string // all in stderr
		not  []string // none in stderr (besides engineWords)
	}{
		{"gpus not a number", []string{"--gpus", "x", "--", "true"},
			[]string{`--gpus: must be a whole number in [1, 1]`, `got "x"`, "1 H100-SXM"}, nil},
		{"gpus without a value", []string{"--gpus"},
			[]string{"--gpus: needs a value"}, nil},
		{"more GPUs than the host", []string{"--gpus", "3", "--", "true"},
			[]string{`--gpus: must be in [1, 1]`, "this host has 1 GPU", "H100-SXM", `got "3"`}, nil},
		{"memory above the host's GPU", []string{"--gpu-memory", "90Gi", "--", "true"},
			[]string{`--gpu-memory: must be at most 81559Mi`, "79.6Gi", "H100-SXM", `got "90Gi"`}, nil},
		{"memory above every GPU of the catalog's largest", []string{"--gpu-memory", "200Gi", "--", "true"},
			[]string{`--gpu-memory: must be at most 81559Mi`, "H100-SXM", `got "200Gi"`}, []string{"MI300X", "192Gi"}},
		{"MIG on a host without GPUs in MIG mode", []string{"--mig", "foo", "--", "true"},
			[]string{`--mig: must be empty on this host, got "foo": none of its GPUs is in MIG mode`, "H100-SXM support MIG"}, []string{"1g.18gb", "7g.141gb", "1g.5gb"}},
		{"memory limit above the GPU", []string{"--gpu-fraction", "0.5", "--gpu-memory-limit", "100Gi", "--", "true"},
			[]string{`--gpu-memory-limit: must be at most 81559Mi`, "79.6Gi", "H100-SXM", `got "100Gi"`}, nil},
		{"memory limit alone, above the GPU", []string{"--gpu-memory-limit", "100Gi", "--", "true"},
			[]string{`--gpu-memory-limit: must be at most 81559Mi`, "79.6Gi", "H100-SXM", `got "100Gi"`, "needs --gpu-memory", "--gpu-fraction"}, []string{`got ""`}},
		{"memory limit alone", []string{"--gpu-memory-limit", "20Gi", "--", "true"},
			[]string{`--gpu-memory-limit: needs --gpu-memory`, "--gpu-fraction", `got "20Gi" alone`, "79.6Gi", "H100-SXM"}, []string{`got ""`}},
		{"memory limit alone, not a size", []string{"--gpu-memory-limit", "lots", "--", "true"},
			[]string{`--gpu-memory-limit: must be a size`, `got "lots"`}, []string{`got ""`}},
		{"model the host lacks", []string{"--model", "H200", "--", "true"},
			[]string{`--model: must be a model this host has (H100-SXM)`, `got "H200"`}, nil},
		{"model nobody knows", []string{"--model", "Z9000", "--", "true"},
			[]string{`--model: must be a model this host has (H100-SXM)`, `got "Z9000"`}, nil},
		{"priority not a number", []string{"--priority", "high", "--", "true"},
			[]string{`--priority: must be a whole number in [-1000, 1000], got "high"`}, nil},
		{"detach not a boolean", []string{"--detach=maybe", "--", "true"},
			[]string{`-d/--detach: must be true or false, got "maybe"`}, nil},
		{"unknown flag", []string{"--gpu-colour", "red", "--", "true"},
			[]string{"unknown flag: --gpu-colour", "tessera run --help"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := tessera(append(append([]string{"run"}, host...), tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (a usage error); stderr %q", code, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			for _, w := range append(append([]string{}, engineWords...), tt.not...) {
				if strings.Contains(errs, w) {
					t.Errorf("stderr %q says %q", errs, w)
				}
			}
		})
	}
	if jobs := psJobs(t, host); len(jobs) != 0 {
		t.Errorf("bad input queued %d jobs", len(jobs))
	}
}

// A request that fits no GPU of a mixed host (more GPUs with that much
// memory than it has) is refused naming --gpus and the GPUs that would do.
func TestRunTooBigForMixedHost(t *testing.T) {
	host := startUp(t, "2xA100-80GB+2xL4").host
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"count with memory", []string{"--gpus", "3", "--gpu-memory", "30Gi", "--", "true"},
			[]string{`--gpus: must be at most 2 with --gpu-memory 30Gi`, "2 A100-80GB", `got "3"`}},
		{"count with model", []string{"--gpus", "3", "--model", "L4", "--", "true"},
			[]string{`--gpus: must be at most 2 with --model L4`, "2 L4", `got "3"`}},
		{"memory on the allowed model", []string{"--model", "L4", "--gpu-memory", "30Gi", "--", "true"},
			[]string{`--gpu-memory: must be at most`, "L4", `got "30Gi"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := tessera(append(append([]string{"run"}, host...), tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			for _, w := range engineWords {
				if strings.Contains(errs, w) {
					t.Errorf("stderr %q says %q", errs, w)
				}
			}
		})
	}
}

// Usage mistakes other than flag values exit 2 too, and say what to type.
func TestUsageErrorsExit2(t *testing.T) {
	state := t.TempDir() // no daemon: usage errors come first
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"run without a command", []string{"run", "--state-dir", state}, "give the command to run after --"},
		{"run with flags but no command", []string{"run", "--state-dir", state, "--gpus", "1", "--"}, "tessera run [flags] -- COMMAND"},
		{"logs without a job", []string{"logs", "--state-dir", state}, "JOB: give one job ID"},
		{"stop without a job", []string{"stop", "--state-dir", state}, "JOB: give at least one job ID"},
		{"ps with an argument", []string{"ps", "--state-dir", state, "job-1"}, `unexpected argument "job-1"`},
		{"ps with a bad format", []string{"ps", "--state-dir", state, "-o", "xml"}, `-o/--output: must be one of table, json, yaml; got "xml"`},
		{"queue with a bad format", []string{"queue", "--state-dir", state, "-o", "xml"}, `-o/--output: must be one of table, json, yaml; got "xml"`},
		{"unknown command", []string{"runn"}, `unknown command "runn" for "tessera"; did you mean run?`},
		{"unknown subcommand", []string{"sim", "compair"}, `unknown command "compair" for "tessera sim"; did you mean compare?`},
		{"stop grace not a duration", []string{"up", "--state-dir", state, "--stop-grace", "soon"}, `--stop-grace: must be a duration such as 90s, 5m or 1h30m, got "soon"`},
		{"sim tune not a number", []string{"sim", "--tune", "lots"}, `--tune: must be a number in (0, 10], got "lots"`},
		{"sim tune out of range", []string{"sim", "--trace", tinyPods, "--nodes", tinyNodes, "-o", state, "--tune", "11"}, `--tune: must be in (0, 10], got 11`},
		{"sim missing trace", []string{"sim", "--trace", "missing.csv", "--nodes", tinyNodes, "-o", state}, `--trace: cannot read "missing.csv" (no such file or directory)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := tessera(tt.args...)
			if code != 2 || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tt.want)
			}
			for _, w := range []string{"strconv", "time: invalid", "arg(s)"} {
				if strings.Contains(errs, w) {
					t.Errorf("stderr %q says %q", errs, w)
				}
			}
		})
	}
}

// `tessera logs` on a job that has not started says so on stderr (and
// why it waits) instead of printing nothing.
func TestLogsOnQueuedJob(t *testing.T) {
	host := startUp(t, "1xH100").host
	gate := filepath.Join(t.TempDir(), "gate")
	wait := `while [ ! -e "$GATE" ]; do [ -d "$(dirname "$GATE")" ] || exit 99; sleep 0.02; done`
	t.Setenv("GATE", gate)
	var ids []string
	for range 2 {
		code, out, errs := tessera(append(append([]string{"run", "--detach", "--env", "GATE"}, host...), "--", "sh", "-c", wait)...)
		if code != 0 {
			t.Fatalf("run --detach: %d %s", code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	t.Cleanup(func() {
		_ = os.WriteFile(gate, nil, 0o600)
		for _, id := range ids {
			tessera(append([]string{"logs", "-f", id}, host...)...)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for running := false; !running; {
		for _, j := range psJobs(t, host) {
			running = running || (j.ID == ids[0] && j.State == api.Running)
		}
		if !running && time.Now().After(deadline) {
			t.Fatalf("job %s did not start", ids[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, out, errs := tessera(append([]string{"logs", ids[1]}, host...)...)
	if code != 1 || out != "" {
		t.Errorf("logs on a queued job: exit %d, stdout %q; want 1 and nothing", code, out)
	}
	for _, w := range []string{ids[1] + " is queued", "no output yet", "waiting for GPU capacity", "tessera logs -f " + ids[1]} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
	for _, w := range engineWords {
		if strings.Contains(errs, w) {
			t.Errorf("stderr %q says %q", errs, w)
		}
	}
}

// `tessera sim -o DIR` checks DIR can be written before replaying: no
// table, no progress, only the -o error.
func TestSimChecksOutputBeforeReplay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "tessera", "-o", filepath.Join(file, "out"))
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr %q", code, errOut)
	}
	if out != "" || strings.Contains(errOut, "simulating") {
		t.Errorf("replayed before checking -o: stdout %q, stderr %q", out, errOut)
	}
	if want := `-o/--output: must be a folder this user can write, got "` + filepath.Join(file, "out") + `"`; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
}
