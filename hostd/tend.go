package hostd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// A job's supervisor ends the job on a stop (SIGTERM, then SIGKILL after
// the stop grace) and records its exit. A supervisor that does not answer
// (the job stopped it with SIGSTOP: it is the job's parent and, when they
// run as the same user, the job may signal it) must not keep the job and
// its GPUs forever: the daemon tends each running job's supervisor while
// it watches it.

// stopAnswer is how long past the stop grace the daemon waits for a
// stopped job's supervisor to have ended the job before it ends the job
// itself: the supervisor sends SIGKILL at the grace and needs moments
// more to see the job's processes gone and record the exit.
const stopAnswer = 2 * time.Second

// frozenScan is how often the processes of a job whose supervisor is
// stopped are listed (a /proc scan), to continue the supervisor once the
// job has ended.
const frozenScan = time.Second

// signalStopLocked sends SIGTERM to j's supervisor, which forwards it to
// the job and sends SIGKILL after the stop grace, and notes when, so the
// daemon ends the job itself if the supervisor has not by the grace and
// stopAnswer (tend). d.mu must be held.
func (d *Daemon) signalStopLocked(j api.Job) error {
	if _, ok := d.stopping[j.ID]; !ok {
		d.stopping[j.ID] = time.Now()
	}
	return syscall.Kill(j.SupervisorPID, syscall.SIGTERM)
}

// tender is what tend knows of one running job's supervisor.
type tender struct {
	id    string
	pid   int
	start uint64
	// scanned is when the job's processes were last listed because its
	// supervisor was stopped; forced says forceStop ran.
	scanned time.Time
	forced  bool
}

// tendChild tends the supervisor of a job this daemon started until it
// ends (done closes) or the daemon closes.
func (d *Daemon) tendChild(t *tender, done <-chan struct{}) {
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-d.life.Done():
			return
		case <-tick.C:
			d.tend(t)
		}
	}
}

// tend looks after a running job's live supervisor, once per poll:
//
//   - a supervisor stopped by a signal whose job has no process left is
//     sent SIGCONT, so it records the job's exit (which only it knows)
//     and ends: a job that stopped its supervisor and then ended does not
//     hold its GPUs;
//   - when the supervisor was sent SIGTERM (a stop or a preemption) more
//     than the stop grace and stopAnswer ago and still runs, the daemon
//     ends the job itself (forceStop).
func (d *Daemon) tend(t *tender) {
	d.mu.Lock()
	since, stopping := d.stopping[t.id]
	d.mu.Unlock()
	if stoppedBySignal(t.pid) && time.Since(t.scanned) >= frozenScan {
		t.scanned = time.Now()
		if d.jobEnded(t.id) {
			d.cfg.Log.Info("continuing the job's supervisor, stopped by a signal: the job has ended and only the supervisor can record its exit", "job", t.id, "pid", t.pid)
			if err := signalProcess(t.pid, t.start, syscall.SIGCONT); err != nil {
				d.cfg.Log.Warn("continue a stopped supervisor", "job", t.id, "pid", t.pid, "err", err)
			}
			return
		}
	}
	if stopping && !t.forced && time.Since(since) >= d.cfg.StopGrace+stopAnswer {
		t.forced = true
		d.forceStop(t)
	}
}

// jobEnded reports whether no process of job id's run is alive (false
// when that cannot be told).
func (d *Daemon) jobEnded(id string) bool {
	spec, err := supervisor.ReadSpec(d.JobDir(id))
	if err != nil {
		return false
	}
	pids, err := spec.Contain.Processes()
	return err == nil && len(pids) == 0
}

// forceStop ends a job whose supervisor did not carry out a stop: it
// records the outcome in the job's exit.json, unless the supervisor
// recorded one, then SIGKILLs the supervisor (a stopped process dies of
// SIGKILL too) and every process of the job. The watcher then sees the
// supervisor gone, makes sure nothing of the job is left (reap) and only
// then frees its GPUs and records the job with that outcome (finish).
func (d *Daemon) forceStop(t *tender) {
	dir := d.JobDir(t.id)
	why := fmt.Sprintf("the supervisor did not answer within the stop grace (%s); the daemon killed the job's processes", d.cfg.StopGrace)
	d.cfg.Log.Warn("a stopped job's supervisor did not end it within the stop grace; the daemon ends the job's processes and the supervisor", "job", t.id, "pid", t.pid, "grace", d.cfg.StopGrace)
	switch _, recorded, err := supervisor.ReadExit(dir); {
	case err != nil:
		d.cfg.Log.Warn("read the exit status of a job being stopped", "job", t.id, "err", err)
	case !recorded:
		// Written before the supervisor is killed, so the watcher that sees
		// it gone reads it; a supervisor that was only slow may still
		// replace it with the job's own exit, which is as true.
		e := supervisor.Exit{Code: 128 + int(syscall.SIGKILL), Reason: why, Finished: d.cfg.Now().UTC()}
		if err := supervisor.WriteJSON(filepath.Join(dir, supervisor.ExitFile), e); err != nil {
			d.cfg.Log.Error("record the exit of a job the daemon stopped", "job", t.id, "err", err)
		}
	}
	if err := signalProcess(t.pid, t.start, syscall.SIGKILL); err != nil {
		d.cfg.Log.Error("kill the supervisor of a job being stopped", "job", t.id, "pid", t.pid, "err", err)
	}
	spec, err := supervisor.ReadSpec(dir)
	if err != nil {
		d.cfg.Log.Warn("find the processes of a job being stopped", "job", t.id, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(d.life, killWait)
	defer cancel()
	if err := spec.Contain.Kill(ctx); err != nil {
		// The watcher keeps trying; the GPUs stay booked meanwhile.
		d.cfg.Log.Warn("end the processes of a job being stopped", "job", t.id, "err", err)
	}
}

// signalProcess sends sig to process pid if it is still the process that
// started at start: a pidfd holds the process while its start time is
// checked, so a reused pid is never signalled. A process already gone
// is not an error.
func signalProcess(pid int, start uint64, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		if !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("open process %d: %w", pid, err)
		}
		// Before Linux 5.3: check, then signal.
		if alive, err := supervisor.Alive(pid, start); err != nil || !alive {
			return err
		}
		return syscall.Kill(pid, sig)
	}
	defer unix.Close(fd)
	if alive, err := supervisor.Alive(pid, start); err != nil || !alive {
		return err
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}

// stoppedBySignal reports whether process pid is stopped by a signal
// (state T in /proc/PID/stat; a process stopped by a tracer, t, is left
// to its tracer).
func stoppedBySignal(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'T'
}
