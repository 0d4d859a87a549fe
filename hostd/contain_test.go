package hostd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// escapingJob starts three processes that outlive a plain process-group
// kill in different ways (a background child, a setsid'd child in a
// session of its own, and a double-forked orphan), records their pids in
// dir, and waits.
func escapingJob(dir string, fields map[string]string) api.SubmitRequest {
	script := `P="$PIDS"
sleep 1000 & echo $! > "$P/bg.tmp" && mv "$P/bg.tmp" "$P/bg"
setsid sh -c 'echo $$ > "$PIDS/sid.tmp" && mv "$PIDS/sid.tmp" "$PIDS/sid"; exec sleep 1000' &
sh -c 'sleep 1000 & echo $! > "$PIDS/orphan.tmp" && mv "$PIDS/orphan.tmp" "$PIDS/orphan"' &
exec sleep 1000`
	return api.SubmitRequest{
		GPU: fields, Command: []string{"/bin/sh", "-c", script},
		Env: []string{"PIDS=" + dir, "PATH=/usr/bin:/bin"},
	}
}

// escapees waits for the pids escapingJob records and returns them with
// their start times.
func escapees(t *testing.T, dir string) map[int]uint64 {
	t.Helper()
	out := map[int]uint64{}
	for _, name := range []string{"bg", "sid", "orphan"} {
		pid, start, ok := recordedPid(t, filepath.Join(dir, name), "its "+name+" pid")
		if !ok {
			t.Fatalf("%s process %d is not running", name, pid)
		}
		out[pid] = start
	}
	return out
}

// recordedPid waits for the pid a job writes to path (what names it in
// messages) and returns it with its start time; ok is false when that
// process is not running any more.
func recordedPid(t *testing.T, path, what string) (pid int, start uint64, ok bool) {
	t.Helper()
	eventually(t, "the job to record "+what, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
		t.Fatalf("%s %q: %v", what, data, err)
	}
	if start, _, ok, err = supervisor.ProcStart(pid); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return pid, start, ok
}

func aliveOf(procs map[int]uint64) []int {
	var out []int
	for pid, start := range procs {
		if ok, _ := supervisor.Alive(pid, start); ok {
			out = append(out, pid)
		}
	}
	return out
}

func killAll(procs map[int]uint64) {
	for pid := range procs {
		if ok, _ := supervisor.Alive(pid, procs[pid]); ok {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Defect: a job whose supervisor was killed was marked lost and its share
// given to a queued job while its processes (reparented to PID 1) kept
// running. The share may only be freed once every process of the job is
// gone, also those that left its process group or session.
func TestLostSupervisorEndsEveryProcessBeforeTheShareIsFreed(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noCgroup bool
	}{{"cgroup", false}, {"marks only", true}} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.noCgroup {
				if h, why := contain.Detect(t.TempDir()); h.Base == "" {
					t.Skipf("no writable cgroup v2 hierarchy here (%s); the marks-only case covers the rest", why)
				} else {
					defer os.Remove(h.Base)
				}
			}
			gates, pids := t.TempDir(), t.TempDir()
			d := startDaemon(t, t.TempDir(), "1xH100", func(c *Config) {
				c.DisablePreemption = true
				if tt.noCgroup {
					c.Contain = ContainMark
				}
			})
			half := map[string]string{"compute": "0.5"}
			j1, err := d.Submit(escapingJob(pids, half))
			if err != nil {
				t.Fatal(err)
			}
			j2, err := d.Submit(gatedJob(gates, half, 0))
			if err != nil {
				t.Fatal(err)
			}
			j3, err := d.Submit(gatedJob(gates, half, 0))
			if err != nil {
				t.Fatal(err)
			}
			procs := escapees(t, pids)
			defer killAll(procs)
			eventually(t, "two jobs running", func() bool {
				st := states(t, d)
				return st[j1.ID] == api.Running && st[j2.ID] == api.Running
			})
			if st := states(t, d)[j3.ID]; st != api.Queued {
				t.Fatalf("third half-GPU job is %s on a full GPU, want queued", st)
			}
			rec, err := d.Job(j1.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(rec.SupervisorPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the queued job to start", func() bool { return states(t, d)[j3.ID] == api.Running })
			// Processes do not come back: what is dead now was dead when
			// the third job started.
			if alive := aliveOf(procs); len(alive) > 0 {
				t.Errorf("processes %v of the lost job still run while its share was given to %s", alive, j3.ID)
			}
			got, err := d.Job(j1.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != api.Lost {
				t.Errorf("job with a killed supervisor is %s, want %s", got.State, api.Lost)
			}
			openGate(t, gates, j2.ID, 0)
			openGate(t, gates, j3.ID, 0)
			eventually(t, "the gated jobs to end", func() bool {
				st := states(t, d)
				return st[j2.ID].Final() && st[j3.ID].Final()
			})
		})
	}
}

// A job that ends while processes it started still run (a daemon it
// forked, a setsid'd child) ends with all of them: its share is free only
// once they are gone.
func TestJobEndEndsWhatItLeftBehind(t *testing.T) {
	pids := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH100", func(c *Config) { c.Contain = ContainMark })
	req := escapingJob(pids, map[string]string{"compute": "0.5"})
	// The main process ends once its children are up.
	req.Command[2] = strings.TrimSuffix(req.Command[2], "exec sleep 1000") +
		`while [ ! -f "$P/orphan" ] || [ ! -f "$P/sid" ] || [ ! -f "$P/bg" ]; do sleep 0.02; done; exit 3`
	j, err := d.Submit(req)
	if err != nil {
		t.Fatal(err)
	}
	procs := escapees(t, pids)
	defer killAll(procs)
	eventually(t, "the job to end", func() bool { return states(t, d)[j.ID].Final() })
	if alive := aliveOf(procs); len(alive) > 0 {
		t.Errorf("processes %v the job left still run after it ended", alive)
	}
	got, _ := d.Job(j.ID)
	if got.State != api.Failed || got.ExitCode == nil || *got.ExitCode != 3 {
		t.Errorf("job = %s exit %v, want failed with the main process's code 3", got.State, got.ExitCode)
	}
}

// A daemon started after a supervisor died (and the daemon with it) ends
// the job's leftover processes before it gives the share away.
func TestRestartEndsProcessesOfALostJob(t *testing.T) {
	state, gates, pids := t.TempDir(), t.TempDir(), t.TempDir()
	opt := func(c *Config) { c.DisablePreemption = true; c.Contain = ContainMark }
	d := startDaemon(t, state, "1xH100", opt)
	full := map[string]string{"compute": "1"}
	j1, err := d.Submit(escapingJob(pids, full))
	if err != nil {
		t.Fatal(err)
	}
	procs := escapees(t, pids)
	defer killAll(procs)
	eventually(t, "the job to run", func() bool { return states(t, d)[j1.ID] == api.Running })
	rec, err := d.Job(j1.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.shutdown()
	if err := syscall.Kill(rec.SupervisorPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the supervisor to die", func() bool {
		ok, _ := supervisor.Alive(rec.SupervisorPID, rec.SupervisorStart)
		return !ok
	})
	d2 := startDaemon(t, state, "1xH100", opt)
	j2, err := d2.Submit(gatedJob(gates, full, 0))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next job to start", func() bool { return states(t, d2)[j2.ID] == api.Running })
	if alive := aliveOf(procs); len(alive) > 0 {
		t.Errorf("processes %v of the lost job still run while its GPU went to %s", alive, j2.ID)
	}
	if st := states(t, d2)[j1.ID]; st != api.Lost {
		t.Errorf("job = %s, want %s", st, api.Lost)
	}
	openGate(t, gates, j2.ID, 0)
	eventually(t, "the gated job to end", func() bool { return states(t, d2)[j2.ID].Final() })
}
