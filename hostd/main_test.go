package hostd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/request"
)

const superviseEnv = "TESSERA_HOSTD_TEST_SUPERVISE"

// TestMain doubles as the job supervisor: the daemon under test starts
// this test binary with superviseEnv set and the job folder as last argument.
func TestMain(m *testing.M) {
	// A fuzz worker (FuzzParseConfig) inherits superviseEnv but is no supervisor.
	if os.Getenv(superviseEnv) == "1" && !slices.Contains(os.Args, "-test.fuzzworker") {
		os.Exit(supervisor.Run(os.Args[len(os.Args)-1]))
	}
	if err := os.Setenv(superviseEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// testDaemon is a daemon running in this process on a state folder.
type testDaemon struct {
	*Daemon
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// testConfig is a daemon configuration on simulated GPUs (spec), whose
// supervisor is this test binary.
func testConfig(t *testing.T, stateDir, spec string) Config {
	t.Helper()
	cat := catalog.Default()
	src, err := discovery.Open("sim:"+spec, cat)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		StateDir: stateDir, Source: src.Name(), Simulated: true, Nodes: nodes, Catalog: cat,
		Supervisor: []string{os.Args[0]}, StopGrace: 5 * time.Second, PollInterval: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	cfg.RuntimeDir = testRuntimeDir(t, stateDir)
	return cfg
}

// testRuntimeDir is the RuntimeDir of a test daemon on stateDir: beside
// it, the same across restarts, and never under /run/tessera, where a
// test's folder would outlive the test and make the real-node test take
// this machine for one with Tessera installed. As root, the folder above
// stateDir (a t.TempDir's, owner-only) is opened for traversal (0711),
// as /run is, so that a job's user reaches its accounting folder.
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

func startDaemon(t *testing.T, stateDir, spec string, opts ...func(*Config)) *testDaemon {
	t.Helper()
	cfg := testConfig(t, stateDir, spec)
	for _, o := range opts {
		o(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return runDaemon(t, d)
}

// runDaemon runs d until the test ends, once its loop runs.
func runDaemon(t *testing.T, d *Daemon) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{Daemon: d, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(td.done)
		_ = d.Run(ctx)
	}()
	t.Cleanup(td.shutdown)
	// Until Run's loop runs, Queue runs no pass: the tests ask it at once.
	eventually(t, "the scheduling loop running", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.looping
	})
	return td
}

// shutdown stops the daemon as a restart would: jobs keep running.
func (td *testDaemon) shutdown() {
	td.once.Do(func() {
		td.cancel()
		<-td.done
		_ = td.Close()
	})
}

// eventually polls cond until it holds; the deadline only bounds a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gatedJob returns a job that prints its devices, then waits until
// gates/<job id> exists and exits with the number written there (or 99
// once the test has removed gates, so a failed test leaves no job behind).
func gatedJob(gates string, fields map[string]string, prio int) api.SubmitRequest {
	script := `echo "$CUDA_VISIBLE_DEVICES"; g="$GATES/$TESSERA_JOB_ID"; while [ ! -s "$g" ]; do [ -d "$GATES" ] || exit 99; sleep 0.02; done; exit "$(cat "$g")"`
	return api.SubmitRequest{
		GPU: fields, Command: []string{"/bin/sh", "-c", script},
		Env: []string{"GATES=" + gates, "PATH=/usr/bin:/bin"}, Priority: prio,
	}
}

func openGate(t *testing.T, gates, id string, code int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(gates, id), []byte(fmt.Sprint(code)), 0o600); err != nil {
		t.Fatal(err)
	}
}

func states(t *testing.T, d *testDaemon) map[string]api.State {
	t.Helper()
	jobs, err := d.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]api.State{}
	for _, j := range jobs {
		out[j.ID] = j.State
	}
	return out
}

func mustGPU(t *testing.T) request.GPU {
	t.Helper()
	g, err := request.Parse(map[string]string{"count": "1"}, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return g
}
