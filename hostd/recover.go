package hostd

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/placement"
)

func decisionOf(j api.Job) placement.Decision {
	return placement.Decision{Node: j.Node, GPUs: j.GPUs}
}

// recover re-books running jobs whose supervisor still runs (checked by
// pid and start time, so a reused pid is not mistaken for the job) and
// records the outcome of those whose supervisor is gone.
func (d *Daemon) recover() error {
	jobs, err := d.store.List()
	if err != nil {
		return fmt.Errorf("recover jobs: %w", err)
	}
	for _, j := range jobs {
		if j.State != api.Running {
			continue
		}
		alive, err := supervisor.Alive(j.SupervisorPID, j.SupervisorStart)
		if err != nil {
			return fmt.Errorf("recover job %s: %w", j.ID, err)
		}
		if !alive {
			d.outcomeLocked(&j)
			d.preemptedOutcome(&j)
			if err := d.store.Put(j); err != nil {
				return fmt.Errorf("recover job %s: %w", j.ID, err)
			}
			d.cfg.Log.Info("job ended while the daemon was down", "job", j.ID, "state", j.State, "reason", j.Reason)
			continue
		}
		pod := podOf(j)
		if err := d.cluster.Apply(&pod, decisionOf(j)); err != nil {
			// The inventory changed under a running job; keep watching it
			// but say its GPUs are not booked.
			d.cfg.Log.Error("re-book adopted job", "job", j.ID, "err", err)
		}
		if d.cfg.Arbiter != nil && !isMIG(j) {
			if _, err := d.cfg.Arbiter.Admit(j, filepath.Join(d.JobDir(j.ID), "shm")); err != nil {
				d.cfg.Log.Error("re-admit adopted job to the arbiter", "job", j.ID, "err", err)
			}
		}
		if j.Preempt != nil || j.StopRequested {
			// The last daemon may have stopped before signalling it.
			if err := syscall.Kill(j.SupervisorPID, syscall.SIGTERM); err != nil {
				d.cfg.Log.Error("signal adopted job being stopped", "job", j.ID, "err", err)
			}
		}
		d.adopted = append(d.adopted, j)
		d.cfg.Log.Info("job re-adopted", "job", j.ID, "pid", j.SupervisorPID)
	}
	return nil
}
