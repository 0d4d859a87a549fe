package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// Issue #34 (6): a frozen daemon (kill -STOP) does not hold the CLI
// forever, a submission it reads after the CLI gave up queues nothing, and
// a retry with the same request ID never queues a job twice.
func TestFrozenDaemonAndRetries(t *testing.T) {
	dir := t.TempDir()
	d := &chaosDaemon{t: t, state: filepath.Join(dir, "state"), sock: filepath.Join(dir, "api.sock"), contain: "mark",
		logPath: filepath.Join(dir, "daemon.log")}
	d.cl = client.New(d.sock)
	d.start()
	t.Cleanup(d.kill)
	host := []string{"--state-dir", d.state, "--socket", d.sock}

	// The same request ID twice: one job.
	rid := []string{"run", "-d", "--request-id", "retry-test-1"}
	var ids []string
	for range 2 {
		code, out, errs := tessera(append(append(rid, host...), "--", "sleep", "600")...)
		if code != 0 {
			t.Fatalf("run -d --request-id: %d %s", code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	if ids[0] != ids[1] {
		t.Errorf("a retry with the same request ID queued a second job: %v", ids)
	}
	if code, _, errs := tessera(append([]string{"run", "-d", "--request-id", "bad id"}, append(host, "--", "true")...)...); code != 2 || !strings.Contains(errs, `--request-id: must be 8 to 64 characters`) {
		t.Errorf("a bad request ID: exit %d, %s", code, errs)
	}

	// Frozen: every call ends after --timeout, saying why.
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, errs := tessera(append(append([]string{"run", "-d", "--timeout", "1s", "--request-id", "frozen-test-1"}, host...), "--", "true")...)
	if code == 0 || !strings.Contains(errs, "got no answer within 1s") || !strings.Contains(errs, "--request-id frozen-test-1") {
		t.Errorf("run -d on a frozen daemon: exit %d after %s, stderr %q", code, time.Since(start).Round(time.Millisecond), errs)
	}
	for _, args := range [][]string{{"ps"}, {"stop", ids[0]}, {"logs", ids[0]}, {"queue"}} {
		code, _, errs := tessera(append(append(args, "--timeout", "1s"), host...)...)
		if code == 0 || !strings.Contains(errs, "got no answer within 1s") {
			t.Errorf("%v on a frozen daemon: exit %d, stderr %q", args, code, errs)
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Thawed, it reads the submission the CLI gave up on: it queues it
	// only if it read it within the CLI's timeout (the signal may land
	// after the daemon read it). Either way, the retry the message
	// suggests ends with exactly one job for it.
	code, out, errs := tessera(append(append([]string{"run", "-d", "--request-id", "frozen-test-1"}, host...), "--", "true")...)
	if code != 0 {
		t.Fatalf("retry after the thaw: %d %s", code, errs)
	}
	var mine []string
	for _, j := range psJobs(t, host) {
		if j.RequestID == "frozen-test-1" {
			mine = append(mine, j.ID)
		}
	}
	if len(mine) != 1 || mine[0] != strings.TrimSpace(out) {
		t.Errorf("after the thaw and a retry: jobs %v for request frozen-test-1, the retry answered %q; want exactly one, the one answered", mine, out)
	}
	// The stop sent while the daemon was frozen may have been carried out
	// once it thawed (a stop is wanted whenever it lands): either way the
	// sleeper ends stopped.
	if code, _, errs := tessera(append([]string{"stop", ids[0]}, host...)...); code != 0 && !strings.Contains(errs, "already finished (stopped)") {
		t.Errorf("stop %s: %d %s", ids[0], code, errs)
	}
	waitJobsGone(t, host)
}

// waitJobsGone waits until every job of the daemon is final and its
// supervisor has exited: a supervisor outlives a killed daemon and writes
// its exit record into the state folder as it ends, which would race the
// removal of the test's temporary folder.
func waitJobsGone(t *testing.T, host []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a liveness bound, not a performance one
	for {
		var busy []string
		for _, j := range psJobs(t, host) {
			if !j.State.Final() {
				busy = append(busy, j.ID+" "+string(j.State))
			} else if alive, _ := supervisor.Alive(j.SupervisorPID, j.SupervisorStart); j.SupervisorPID > 0 && alive {
				busy = append(busy, fmt.Sprintf("%s's supervisor %d", j.ID, j.SupervisorPID))
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still running 60s after the test: %v", busy)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
