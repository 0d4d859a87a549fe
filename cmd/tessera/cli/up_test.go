package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
	"github.com/tessera-gpu/tessera/hostd/api"
)

const cliSuperviseEnv = "TESSERA_CLI_TEST_MAIN"

// TestMain lets the test binary stand in for the tessera binary: the
// daemon under test starts `<this binary> supervise JOBDIR` for each job.
// A fuzzing worker (go test -fuzz starts this binary again, with
// -test.fuzzworker first and this environment) runs the tests' code.
func TestMain(m *testing.M) {
	if os.Getenv(cliSuperviseEnv) == "1" && (len(os.Args) < 2 || os.Args[1] != "-test.fuzzworker") {
		os.Exit(Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	if err := os.Setenv(cliSuperviseEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// daemon is a `tessera up` running in this process.
type daemon struct {
	t      *testing.T
	dir    string
	host   []string
	spec   string
	extra  []string // more `tessera up` flags
	cancel context.CancelFunc
	done   chan int
	// runtime is its --runtime-dir, kept across restarts (testRuntimeDir).
	runtime string
}

// startUp runs `tessera up` in this process on a fresh state folder; its
// host field holds the --state-dir/--socket flags that reach it.
func startUp(t *testing.T, spec string, extra ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, dir: dir, spec: spec, extra: extra, host: []string{"--state-dir", dir, "--socket", filepath.Join(dir, "api.sock")}}
	d.start()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan int, 1)
	if d.runtime == "" {
		d.runtime = testRuntimeDir(d.t, d.dir)
	}
	go func() {
		args := append([]string{"up", "--simulate", d.spec, "--log-level", "error", "--runtime-dir", d.runtime}, d.host...)
		d.done <- Execute(ctx, append(args, d.extra...), io.Discard, io.Discard)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", filepath.Join(d.dir, "api.sock"))
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("daemon did not come up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testRuntimeDir is the --runtime-dir of a test daemon on stateDir: beside
// it, never under /run/tessera, where a test's folder would outlive the
// test and make the real-node test take this machine for one with
// Tessera installed. As root, the folder above stateDir (a t.TempDir's,
// owner-only) is opened for traversal (0711), as /run is, so that a job's
// user reaches its accounting folder.
func testRuntimeDir(t *testing.T, stateDir string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		parent := filepath.Dir(stateDir)
		fi, err := os.Stat(parent)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 == 0 {
			if err := os.Chmod(parent, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(filepath.Dir(stateDir), "run-"+filepath.Base(stateDir), "tessera")
}

// stop ends the daemon as Ctrl-C would; jobs keep running.
func (d *daemon) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

func tessera(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func psJobs(t *testing.T, host []string) []api.Job {
	t.Helper()
	code, out, errs := tessera(append([]string{"ps", "-a", "-o", "json"}, host...)...)
	if code != 0 {
		t.Fatalf("ps: %d %s", code, errs)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatalf("ps output %q: %v", out, err)
	}
	return jobs
}

func TestRunExitCodeAndOutput(t *testing.T) {
	host := startUp(t, "2xH200").host
	run := append([]string{"run"}, host...)
	code, out, errs := tessera(append(run, "--gpu-fraction", "0.5", "--", "sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $TESSERA_COMPUTE_REQUEST"; echo oops >&2; exit 3`)...)
	if code != 3 {
		t.Fatalf("exit code %d, want the job's 3 (stderr %q)", code, errs)
	}
	if !strings.HasPrefix(out, "GPU-") || !strings.Contains(out, " 500m") {
		t.Errorf("stdout %q, want a GPU UUID and 500m", out)
	}
	if !strings.Contains(errs, "oops") {
		t.Errorf("stderr %q, want the job's stderr", errs)
	}
	if code, _, errs := tessera(append(run, "--", "true")...); code != 0 {
		t.Errorf("true: exit %d (%s)", code, errs)
	}
}

func TestRunRejectsBadInputAndQueuesNothing(t *testing.T) {
	host := startUp(t, "2xH200").host
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fraction zero", []string{"--gpu-fraction", "0", "--", "true"}, "--gpu-fraction"},
		{"limit below request", []string{"--gpu-fraction", "0.5", "--gpu-limit", "0.2", "--", "true"}, "--gpu-limit"},
		{"more GPUs than the host", []string{"--gpus", "3", "--", "true"}, "--gpus: must be in [1, 2]"},
		{"missing command", []string{"--", "no-such-command-tessera"}, "command:"},
		{"bad queue", []string{"--queue", "No Spaces", "--", "true"}, "--queue"},
		{"priority out of range", []string{"--priority", "9999", "--", "true"}, "--priority: must be in [-1000, 1000]"},
		{"unknown flag", []string{"--gpu-colour", "red", "--", "true"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := tessera(append(append([]string{"run"}, host...), tt.args...)...)
			if code == 0 || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want non-zero and %q", code, errs, tt.want)
			}
		})
	}
	if jobs := psJobs(t, host); len(jobs) != 0 {
		t.Errorf("bad input queued %d jobs", len(jobs))
	}
}

func TestDetachQueueStopLogs(t *testing.T) {
	host := startUp(t, "1xH200").host
	gate := filepath.Join(t.TempDir(), "gate")
	wait := fmt.Sprintf(`echo started; while [ ! -e %[1]s ]; do [ -d "$(dirname %[1]s)" ] || exit 99; sleep 0.02; done; echo done`, gate)
	var ids []string
	for i := 0; i < 3; i++ {
		code, out, errs := tessera(append(append([]string{"run", "--detach"}, host...), "--", "sh", "-c", wait)...)
		if code != 0 {
			t.Fatalf("run --detach: %d %s", code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	code, out, _ := tessera(append([]string{"queue"}, host...)...)
	if code != 0 || !strings.Contains(out, ids[1]) || !strings.Contains(out, ids[2]) || strings.Contains(out, ids[0]+" ") {
		t.Errorf("queue (exit %d):\n%s", code, out)
	}
	if code, out, errs := tessera(append([]string{"stop", ids[2]}, host...)...); code != 0 || !strings.Contains(out, "stopped") {
		t.Errorf("stop queued: %d %q %q", code, out, errs)
	}
	if code, _, errs := tessera(append([]string{"stop", "job-404"}, host...)...); code == 0 || !strings.Contains(errs, "no job") {
		t.Errorf("stop unknown: %d %q", code, errs)
	}
	code, out, _ = tessera(append([]string{"ps", "--gpus"}, host...)...)
	if code != 0 || !strings.Contains(out, ids[0]) || !strings.Contains(out, "simulated") {
		t.Errorf("ps --gpus:\n%s", out)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = tessera(append([]string{"logs", "-f", ids[1]}, host...)...)
	if code != 0 || out != "started\ndone\n" {
		t.Errorf("logs -f %s: %d %q", ids[1], code, out)
	}
	states := map[string]api.State{}
	for _, j := range psJobs(t, host) {
		states[j.ID] = j.State
	}
	want := map[string]api.State{ids[0]: api.Succeeded, ids[1]: api.Succeeded, ids[2]: api.Stopped}
	for id, s := range want {
		if states[id] != s && !(id == ids[0] && states[id] == api.Running) {
			t.Errorf("%s: %s, want %s", id, states[id], s)
		}
	}
}

func TestUpRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	fake := mpstest.Write(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--socket-mode", "999"}, "--socket-mode"},
		{[]string{"--http", "0.0.0.0:1"}, "--http: must be a loopback address"},
		{[]string{"--simulate", "3xNoSuchGPU"}, "--simulate"},
		{[]string{"--intercept-lib", filepath.Join(dir, "missing.so")}, "--intercept-lib"},
		{[]string{"--sharing", "fair"}, `--sharing: must be shared or mps, got "fair"`},
		{[]string{"--mps-root", "/tmp/mps"}, "--mps-root: only with --sharing mps, got --sharing shared"},
		{[]string{"--sharing", "shared", "--mps-control", fake}, "--mps-control: only with --sharing mps"},
		{[]string{"--sharing", "mps", "--simulate", "1xH200"}, "--sharing mps: needs NVIDIA GPUs and their driver's MPS; this host's GPUs are simulated (sim:1xH200). Use --sharing shared, or give --mps-control PATH"},
		{[]string{"--sharing", "mps", "--simulate", "1xH200", "--mps-control", filepath.Join(dir, "missing")}, "--mps-control: must be an executable file"},
		{[]string{"--sharing", "mps", "--simulate", "1xH200", "--mps-control", fake, "--mps-root", "/" + strings.Repeat("r", 80)}, "--mps-root: mps: root: pipe folder"},
		{[]string{"--contain", "cgroups"}, `--contain: must be auto, cgroup or mark, got "cgroups"`},
	}
	for _, tt := range tests {
		code, _, errs := tessera(append([]string{"up", "--state-dir", dir}, tt.args...)...)
		if code == 0 || !strings.Contains(errs, tt.want) {
			t.Errorf("up %v: exit %d, stderr %q; want %q", tt.args, code, errs, tt.want)
		}
	}
}

// A daemon restart in the middle of a streaming `tessera run` loses
// nothing: the run resumes its output, exits with the job's code, and the
// job queued behind it still runs.
func TestRunSurvivesDaemonRestart(t *testing.T) {
	d := startUp(t, "1xH200")
	gate := filepath.Join(t.TempDir(), "gate")
	type result struct {
		code     int
		out, err string
	}
	res := make(chan result, 1)
	go func() {
		script := fmt.Sprintf(`echo before; while [ ! -e %[1]s ]; do [ -d "$(dirname %[1]s)" ] || exit 99; sleep 0.02; done; echo after; exit 5`, gate)
		code, out, errs := tessera(append(append([]string{"run"}, d.host...), "--", "sh", "-c", script)...)
		res <- result{code, out, errs}
	}()
	first := filepath.Join(d.dir, "jobs", "job-1", "stdout.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out, _ := os.ReadFile(first); string(out) == "before\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job-1 did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, out, errs := tessera(append(append([]string{"run", "-d"}, d.host...), "--", "sh", "-c", "echo second")...)
	if code != 0 || strings.TrimSpace(out) != "job-2" {
		t.Fatalf("second job: %d %q %q", code, out, errs)
	}

	d.stop()
	d.start()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.code != 5 || r.out != "before\nafter\n" {
		t.Errorf("run across a restart: exit %d, stdout %q (stderr %q); want 5 and both lines", r.code, r.out, r.err)
	}
	code, out, _ = tessera(append([]string{"logs", "-f", "job-2"}, d.host...)...)
	if code != 0 || out != "second\n" {
		t.Errorf("queued job after the restart: %d %q", code, out)
	}
	states := map[string]api.State{}
	for _, j := range psJobs(t, d.host) {
		states[j.ID] = j.State
	}
	if states["job-1"] != api.Failed || states["job-2"] != api.Succeeded || len(states) != 2 {
		t.Errorf("jobs after the restart: %v", states)
	}
}

// Interrupting a streaming `tessera run` stops its job and reports the
// job's end.
func TestRunInterruptStopsJob(t *testing.T) {
	d := startUp(t, "1xH200")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Execute(ctx, append(append([]string{"run"}, d.host...), "--", "sh", "-c", `echo up; exec sleep 60`), &out, &errb)
	}()
	log := filepath.Join(d.dir, "jobs", "job-1", "stdout.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(log); string(b) == "up\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if c := <-code; c != 128+15 {
		t.Errorf("exit %d, want 143 (SIGTERM); stderr %q", c, errb.String())
	}
	jobs := psJobs(t, d.host)
	if len(jobs) != 1 || jobs[0].State != api.Stopped {
		t.Errorf("jobs after the interrupt: %+v", jobs)
	}
}

// `tessera up --sharing mps` runs an MPS control daemon per GPU (here the
// fake of package mpstest) and starts each job with its MPS settings; a
// job of two GPUs is refused under --gpus and nothing is queued.
func TestUpSharingMPS(t *testing.T) {
	root := mpstest.ShortDir(t)
	host := startUp(t, "2xH200", "--sharing", "mps", "--mps-control", mpstest.Write(t), "--mps-root", root).host
	run := append([]string{"run"}, host...)
	code, out, errs := tessera(append(run, "--gpu-fraction", "0.25", "--gpu-limit", "0.45", "--gpu-memory-limit", "20Gi", "--",
		"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"`)...)
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %q", code, errs)
	}
	f := strings.Fields(out)
	if len(f) != 4 || f[1] != filepath.Join(root, f[0], "pipe") || f[2] != "45" || f[3] != "0=20480M" {
		t.Errorf("job printed %q, want its GPU, %s/<GPU>/pipe, 45 and 0=20480M", out, root)
	}
	if len(f) == 4 && !mpstest.Running(f[1]) {
		t.Errorf("no MPS control daemon answers on %s", f[1])
	}
	code, _, errs = tessera(append(run, "--gpus", "2", "--", "true")...)
	if want := "--gpus: must be 1 on this host, got 2: it shares GPUs with NVIDIA MPS"; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("run --gpus 2: exit %d, stderr %q; want 2 and %q", code, errs, want)
	}
	if jobs := psJobs(t, host); len(jobs) != 1 {
		t.Errorf("%d jobs, want only the first", len(jobs))
	}
}

// TestShowGPUsLiveBookings: with a host daemon running, show-gpus reads its
// (simulated) inventory and reports the free capacity its jobs leave.
func TestShowGPUsLiveBookings(t *testing.T) {
	host := startUp(t, "2xH200").host
	gate := filepath.Join(t.TempDir(), "gate")
	wait := fmt.Sprintf(`while [ ! -e %[1]s ]; do [ -d "$(dirname %[1]s)" ] || exit 99; sleep 0.02; done`, gate)
	code, out, errs := tessera(append(append([]string{"run", "--detach", "--gpu-fraction", "0.25"}, host...), "--", "sh", "-c", wait)...)
	if code != 0 {
		t.Fatalf("run --detach: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { // let the job end before its folders are removed
		_ = os.WriteFile(gate, nil, 0o600)
		tessera(append([]string{"logs", "-f", id}, host...)...)
	})
	// --detach returns once the job is queued; it is booked when it starts.
	deadline := time.Now().Add(30 * time.Second)
	for running := false; !running; {
		for _, j := range psJobs(t, host) {
			running = running || (j.ID == id && j.State == api.Running)
		}
		if !running && time.Now().After(deadline) {
			t.Fatalf("job %s did not start", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, out, errs = tessera(append([]string{"show-gpus", "H200", "-o", "json"}, host...)...)
	if code != 0 {
		t.Fatalf("show-gpus: %d %s", code, errs)
	}
	if !strings.Contains(errs, "free capacity as booked by the host daemon") {
		t.Errorf("show-gpus stderr %q lacks the daemon note", errs)
	}
	var rep struct {
		Rows []struct {
			Model        string   `json:"model"`
			Total        *int     `json:"total"`
			FreeCapacity *float64 `json:"freeCapacity"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("show-gpus output %q: %v", out, err)
	}
	for _, r := range rep.Rows {
		if r.Model == "H200" {
			if r.Total == nil || *r.Total != 2 || r.FreeCapacity == nil || *r.FreeCapacity != 1.75 {
				t.Fatalf("H200 row: total %d, free capacity %.3f; want 2 and 1.75", deref(r.Total), deref(r.FreeCapacity))
			}
			return
		}
	}
	t.Fatalf("no H200 row in %s", out)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
