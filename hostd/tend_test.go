package hostd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// stopParent is a job script that stops its supervisor (its parent) with
// SIGSTOP, waits until it is stopped, writes its own pid to $PIDS/main,
// then runs rest.
func stopParent(rest string) string {
	return `kill -STOP $PPID
while ! grep -q '^State:[[:space:]]*T' /proc/$PPID/status; do sleep 0.01; done
echo $$ > "$PIDS/main.tmp" && mv "$PIDS/main.tmp" "$PIDS/main"
` + rest
}

// mainPid waits for the pid stopParent records and returns it with its
// start time.
func mainPid(t *testing.T, pids string) (int, uint64) {
	t.Helper()
	pid, start, _ := recordedPid(t, filepath.Join(pids, "main"), "the pid of the job that stops its supervisor")
	return pid, start
}

// Issue 34 (3): a job that stopped its supervisor and then ended by itself
// is recorded with its own exit status (the daemon continues the stopped
// supervisor once no process of the job is left), and its GPU is freed.
func TestStoppedSupervisorOfAnEndedJobIsContinued(t *testing.T) {
	pids := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH100", func(c *Config) { c.Contain = ContainMark })
	j, err := d.Submit(api.SubmitRequest{
		GPU: map[string]string{"count": "1"}, Command: []string{"/bin/sh", "-c", stopParent("exit 3")},
		Env: []string{"PIDS=" + pids, "PATH=/usr/bin:/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mainPid(t, pids)
	eventually(t, "the job to end", func() bool { return states(t, d)[j.ID].Final() })
	got, err := d.Job(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.Failed || got.ExitCode == nil || *got.ExitCode != 3 {
		t.Errorf("job = %s exit %v (%s), want failed with its own exit code 3", got.State, got.ExitCode, got.Reason)
	}
	if alive, _ := supervisor.Alive(got.SupervisorPID, got.SupervisorStart); alive {
		t.Errorf("supervisor %d still runs after the job was recorded", got.SupervisorPID)
	}
}

// Issue 34 (3): a daemon started while a job's supervisor is stopped
// (SIGSTOP by the job) re-adopts the job and can still stop it: it ends
// the job's processes and the supervisor itself once the supervisor has
// not answered within the stop grace, records why, and frees the GPU for
// the next job.
func TestRestartedDaemonStopsAJobWhoseSupervisorIsStopped(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cgroup bool
	}{{"cgroup", true}, {"marks only", false}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cgroup {
				if h, why := contain.Detect(t.TempDir()); h.Base == "" {
					t.Skipf("no writable cgroup v2 hierarchy here (%s); the marks-only case covers the rest", why)
				}
			}
			state, gates, pids := t.TempDir(), t.TempDir(), t.TempDir()
			opt := func(c *Config) {
				c.StopGrace = time.Second
				if !tt.cgroup {
					c.Contain = ContainMark
				}
			}
			d := startDaemon(t, state, "1xH100", opt)
			// The second process clears its environment: only a cgroup keeps it.
			rest := `sleep 600 & echo $! > "$PIDS/bg"; exec sleep 600`
			if tt.cgroup {
				rest = `setsid env -i sleep 600 & echo $! > "$PIDS/bg"; exec sleep 600`
			}
			j, err := d.Submit(api.SubmitRequest{
				GPU: map[string]string{"count": "1"}, Command: []string{"/bin/sh", "-c", stopParent(rest)},
				Env: []string{"PIDS=" + pids, "PATH=/usr/bin:/bin"},
			})
			if err != nil {
				t.Fatal(err)
			}
			pid, start := mainPid(t, pids)
			defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
			rec, err := d.Job(j.ID)
			if err != nil {
				t.Fatal(err)
			}
			d.shutdown()
			d2 := startDaemon(t, state, "1xH100", opt)
			next, err := d2.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d2.Stop(j.ID); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the stopped job to end", func() bool { return states(t, d2)[j.ID].Final() })
			got, err := d2.Job(j.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := "the supervisor did not answer within the stop grace (1s); the daemon killed the job's processes"
			if got.State != api.Stopped || got.Reason != want {
				t.Errorf("job = %s %q, want %s %q", got.State, got.Reason, api.Stopped, want)
			}
			// Nothing of the job comes back: what is dead now was dead when
			// it was recorded.
			if alive, _ := supervisor.Alive(rec.SupervisorPID, rec.SupervisorStart); alive {
				t.Errorf("the stopped supervisor %d still runs", rec.SupervisorPID)
			}
			if alive, _ := supervisor.Alive(pid, start); alive {
				t.Errorf("the job's process %d still runs", pid)
			}
			bg, err := os.ReadFile(filepath.Join(pids, "bg"))
			if err != nil {
				t.Fatal(err)
			}
			if bgPid, err := strconv.Atoi(strings.TrimSpace(string(bg))); err != nil {
				t.Fatal(err)
			} else if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(bgPid) + "/cmdline"); err == nil && strings.HasPrefix(string(cmd), "sleep\x00") {
				t.Errorf("the job's background process %d still runs", bgPid)
				_ = syscall.Kill(bgPid, syscall.SIGKILL)
			}
			eventually(t, "the next job to get the GPU", func() bool { return states(t, d2)[next.ID] == api.Running })
			openGate(t, gates, next.ID, 0)
			eventually(t, "the next job to end", func() bool { return states(t, d2)[next.ID].Final() })
		})
	}
}

// Issue 34 (7): the daemon removes its own cgroup folder when it ends
// with no job left in it, and empty folders earlier daemons left, but
// never one that holds a job.
func TestDaemonCgroupFoldersAreRemoved(t *testing.T) {
	h, why := contain.Detect(t.TempDir())
	if h.Base == "" {
		t.Skipf("no writable cgroup v2 hierarchy here (%s)", why)
	}
	_ = os.Remove(h.Base)
	parent := filepath.Dir(h.Base)
	stale, err := os.MkdirTemp(parent, "daemon-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stale)
	// An earlier daemon's folder whose job still runs stays.
	busy := filepath.Join(parent, filepath.Base(stale)+"busy")
	if err := os.MkdirAll(filepath.Join(busy, "job-1.x"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.Remove(filepath.Join(busy, "job-1.x"))
		_ = os.Remove(busy)
	}()

	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH100")
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("empty folder %s of an earlier daemon is still there after a start: %v", stale, err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("folder %s with a job cgroup in it was removed: %v", busy, err)
	}
	base := d.contain.Base
	j, err := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	// The job's first output: it runs in its cgroup.
	eventually(t, "the job to print", func() bool {
		out, _ := os.ReadFile(filepath.Join(d.JobDir(j.ID), supervisor.StdoutFile))
		return len(out) > 0
	})
	d.shutdown()
	if _, err := os.Stat(base); err != nil {
		t.Errorf("the daemon's folder %s was removed while its job runs in it: %v", base, err)
	}
	d2 := startDaemon(t, d.StateDir(), "1xH100")
	openGate(t, gates, j.ID, 0)
	eventually(t, "the job to end", func() bool { return states(t, d2)[j.ID].Final() })
	d2.shutdown()
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("the daemon's folder %s is still there after a clean exit with no job left: %v", base, err)
	}
}
