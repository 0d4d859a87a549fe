package hostd

import (
	"context"
	"os/exec"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// watchChild reaps a supervisor this daemon started and records the job's end.
func (d *Daemon) watchChild(id string, cmd *exec.Cmd, done chan struct{}) {
	_ = cmd.Wait() // the supervisor's own status; the job's is in exit.json
	close(done)
	if d.reap(d.life, id) {
		d.finish(id)
	}
}

// reap ends whatever is left of job id's processes (all of them when its
// supervisor died: a lost job's process group, and what it setsid'd away
// from it) and waits until none is alive, trying again until ctx ends.
// Its share must not be freed before: reap reports whether none is left.
func (d *Daemon) reap(ctx context.Context, id string) bool {
	spec, err := supervisor.ReadSpec(d.JobDir(id))
	if err != nil {
		// No spec: the supervisor was never started, so neither was the job.
		d.cfg.Log.Warn("find the processes of an ended job", "job", id, "err", err)
		return true
	}
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		kctx, cancel := context.WithTimeout(ctx, killWait)
		err := spec.Contain.Kill(kctx)
		cancel()
		if err == nil {
			if err := spec.Contain.Remove(); err != nil {
				d.cfg.Log.Warn("remove job cgroup", "job", id, "err", err)
			}
			return true
		}
		d.cfg.Log.Error("processes of an ended job are still alive; its share stays booked", "job", id, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// killWait bounds one attempt to see a job's processes die after SIGKILL.
const killWait = 10 * time.Second

// watchAdopted polls a supervisor started by an earlier daemon (not our
// child, so it cannot be waited for) until it is gone.
func (d *Daemon) watchAdopted(ctx context.Context, j api.Job) {
	defer d.watchers.Done()
	t := time.NewTicker(d.cfg.PollInterval)
	defer t.Stop()
	tend := &tender{id: j.ID, pid: j.SupervisorPID, start: j.SupervisorStart}
	for {
		alive, err := supervisor.Alive(j.SupervisorPID, j.SupervisorStart)
		if err != nil {
			d.cfg.Log.Warn("check adopted job", "job", j.ID, "err", err)
		}
		if !alive && err == nil {
			if d.reap(ctx, j.ID) {
				d.finish(j.ID)
			}
			return
		}
		if alive {
			d.tend(tend)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// finish records the end of a running job whose supervisor is gone and
// frees its GPUs.
func (d *Daemon) finish(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return // a later daemon re-adopts and records it
	}
	delete(d.children, id)
	delete(d.stopping, id)
	j, err := d.store.Get(id)
	if err != nil || j.State != api.Running {
		return
	}
	dec := decisionOf(j)
	d.outcomeLocked(&j)
	d.preemptedOutcome(&j)
	// Every process of the job has ended (reap), so an instance created for
	// it is destroyed now; one something else still uses keeps its slices
	// booked in the engine until retryMIG destroys it.
	if w := migWorkload(j.ID, j.Runs); isMIG(j) && !d.releaseMIGLocked(w, j.ID, &dec) {
		d.cfg.Log.Warn("the job's MIG instance is still in use; its slices stay booked until it is destroyed", "job", j.ID)
		d.keepMIGLocked(w, j, dec)
	} else if err := d.releaseLocked(j, dec); err != nil {
		d.cfg.Log.Error("release placement", "job", j.ID, "err", err)
	}
	if d.cfg.Arbiter != nil && !isMIG(j) {
		d.cfg.Arbiter.Release(j.ID)
	}
	d.dropShm(j)
	if err := d.store.Put(j); err != nil {
		d.cfg.Log.Error("record finished job", "job", j.ID, "err", err)
	} else if j.State == api.Queued {
		d.core.Add(itemOf(j)) // a restartable job, re-queued after a preemption
	}
	d.core.ClusterChanged()
	d.cfg.Log.Info("job finished", "job", j.ID, "state", j.State, "reason", j.Reason)
	d.notifyLocked()
	d.poke()
}

// outcomeLocked sets j's final state from its recorded exit status.
func (d *Daemon) outcomeLocked(j *api.Job) {
	e, ok, err := supervisor.ReadExit(d.JobDir(j.ID))
	now := d.cfg.Now().UTC()
	switch {
	case err != nil || !ok:
		j.State, j.Finished = api.Lost, &now
		j.Reason = "the job's supervisor ended without recording an exit status"
		if why := supervisor.WhyNoExit(d.JobDir(j.ID)); why != "" {
			j.Reason += ": " + why
		}
		if err != nil {
			j.Reason += " (" + err.Error() + ")"
		}
		if j.StopRequested {
			j.State = api.Stopped
		}
		return
	case j.StopRequested:
		j.State = api.Stopped
	case e.Code == 0:
		j.State = api.Succeeded
	default:
		j.State = api.Failed
	}
	code := e.Code
	j.ExitCode, j.Reason = &code, e.Reason
	fin := e.Finished
	j.Finished = &fin
}
