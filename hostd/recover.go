package hostd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/placement"
)

func decisionOf(j api.Job) placement.Decision {
	return placement.Decision{Node: j.Node, GPUs: j.GPUs, MIG: migChoices(j)}
}

// recover re-books running jobs whose supervisor still runs (checked by
// pid and start time, so a reused pid is not mistaken for the job) and
// records the outcome of those whose supervisor is gone.
func (d *Daemon) recover() error {
	jobs, err := d.store.List()
	if err != nil {
		return fmt.Errorf("recover jobs: %w", err)
	}
	// The policy learns the workload from arrivals; a new daemon knows
	// none, so the jobs still running arrive again, oldest first (the
	// queued ones arrive through the core, as loadQueue adds them).
	running := slices.Clone(jobs)
	slices.SortStableFunc(running, func(a, b api.Job) int { return a.Submitted.Compare(b.Submitted) })
	for _, j := range running {
		if j.State == api.Running {
			d.arrivedRunning(j)
		}
	}
	for _, j := range jobs {
		if j.State != api.Running {
			continue
		}
		if j.SupervisorPID == 0 {
			requeued, err := d.recoverStarting(&j)
			if err != nil {
				return fmt.Errorf("recover job %s: %w", j.ID, err)
			}
			if requeued {
				continue
			}
		}
		alive, err := supervisor.Alive(j.SupervisorPID, j.SupervisorStart)
		if err != nil {
			return fmt.Errorf("recover job %s: %w", j.ID, err)
		}
		if !alive && d.leftNothing(j) {
			d.outcomeLocked(&j)
			d.preemptedOutcome(&j)
			if err := d.store.Put(j); err != nil {
				return fmt.Errorf("recover job %s: %w", j.ID, err)
			}
			d.cfg.Log.Info("job ended while the daemon was down", "job", j.ID, "state", j.State, "reason", j.Reason)
			continue
		}
		if err := d.bookLocked(j, decisionOf(j)); err != nil {
			// The inventory changed under a running job; keep watching it
			// but say its GPUs are not booked.
			d.cfg.Log.Error("re-book adopted job", "job", j.ID, "err", err)
		}
		if d.cfg.Arbiter != nil && !isMIG(j) {
			if _, err := d.cfg.Arbiter.Admit(j, d.shmOf(j)); err != nil {
				d.cfg.Log.Error("re-admit adopted job to the arbiter", "job", j.ID, "err", err)
			}
		}
		if alive && (j.Preempt != nil || j.StopRequested) {
			// The last daemon may have stopped before signalling it.
			if err := d.signalStopLocked(j); err != nil {
				d.cfg.Log.Error("signal adopted job being stopped", "job", j.ID, "err", err)
			}
		}
		d.adopted = append(d.adopted, j)
		if !alive {
			// Its supervisor died but processes of the job still run: the
			// share stays booked until the watcher has ended them.
			d.cfg.Log.Warn("job's supervisor is gone but its processes run; ending them", "job", j.ID)
			continue
		}
		d.cfg.Log.Info("job re-adopted", "job", j.ID, "pid", j.SupervisorPID)
	}
	return nil
}

// loadQueue gives the scheduling core the jobs queued in the store: those
// an earlier daemon left queued, re-queued by recover, or left by
// tessera up --recover.
func (d *Daemon) loadQueue() error {
	jobs, err := d.store.List()
	if err != nil {
		return fmt.Errorf("load the queue: %w", err)
	}
	for _, j := range jobs {
		if j.State == api.Queued {
			d.core.Add(itemOf(j))
		}
	}
	return nil
}

// recoverStarting settles a job the last daemon recorded as starting but
// died before recording its supervisor: it cancels the run's claim, and
// queues the job again when that wins (no supervisor started the job, and
// a late one will not); when the supervisor had claimed the run, j gets
// its pid and start time and is adopted as any running job.
func (d *Daemon) recoverStarting(j *api.Job) (requeued bool, err error) {
	claim := supervisor.ClaimFile(d.JobDir(j.ID), j.Runs)
	err = supervisor.Cancel(claim)
	if errors.Is(err, supervisor.ErrClaimed) {
		c, ok, rerr := supervisor.ReadClaim(claim)
		switch {
		case rerr != nil:
			return false, rerr
		case !ok:
			return false, fmt.Errorf("claim %s vanished", claim)
		case !c.Cancelled:
			j.SupervisorPID, j.SupervisorStart = c.PID, c.Start
			if err := d.store.Put(*j); err != nil {
				return false, err
			}
			return false, nil
		}
		err = nil // cancelled by an earlier recovery that stopped before queueing it
	}
	if err != nil {
		return false, err
	}
	j.State, j.Started, j.Node, j.GPUs, j.Shares = api.Queued, nil, 0, nil, nil
	if err := d.store.Put(*j); err != nil {
		return false, err
	}
	d.cfg.Log.Info("job was being started when the daemon stopped; it never ran and is queued again", "job", j.ID)
	return true, nil
}

// leftNothing reports whether no process of j's last run is alive (true
// when that cannot be known: a job started before processes were marked).
func (d *Daemon) leftNothing(j api.Job) bool {
	spec, err := supervisor.ReadSpec(d.JobDir(j.ID))
	if err != nil {
		return true
	}
	pids, err := spec.Contain.Processes()
	if err != nil {
		d.cfg.Log.Warn("find the processes of a job", "job", j.ID, "err", err)
		return false
	}
	if len(pids) == 0 {
		if err := spec.Contain.Remove(); err != nil {
			d.cfg.Log.Warn("remove job cgroup", "job", j.ID, "err", err)
		}
	}
	return len(pids) == 0
}
