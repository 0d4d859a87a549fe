package hostd

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// preemptLocked stops the victims the cycle named for w, the head of the
// queue, which does not fit: it marks them (persisted, so a restart keeps
// the reason) and sends their supervisors SIGTERM (SIGKILL follows after
// the stop grace).
func (d *Daemon) preemptLocked(w api.Job, victims []cycle.Victim, jobs []api.Job) {
	byID := map[string]api.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	now := d.cfg.Now()
	for _, victim := range victims {
		v, ok := byID[victim.ID]
		if !ok {
			continue
		}
		p := &api.Preemption{By: w.ID, Kind: victim.Kind.String(), At: now.UTC()}
		switch victim.Kind {
		case preemption.ByReclaim:
			p.Reason = fmt.Sprintf("preempted by %s of queue %s, which is below its guaranteed share, to reclaim GPU capacity from queue %s, which is above its own", w.ID, queueing.QueueOr(w.Queue), queueing.QueueOr(v.Queue))
		case preemption.ByIdle:
			p.Reason = fmt.Sprintf("stopped for %s of queue %s: this job held its GPUs idle longer than its queue %s reclaims idle holders after (idleReclaimAfter %v)", w.ID, queueing.QueueOr(w.Queue), queueing.QueueOr(v.Queue), d.idleReclaimAfter(v.Queue))
		default:
			p.Reason = fmt.Sprintf("preempted by %s (priority %d) of queue %s; this job's priority is %d", w.ID, w.Priority, queueing.QueueOr(w.Queue), v.Priority)
		}
		v.Preempt = p
		if err := d.store.Put(v); err != nil {
			d.cfg.Log.Error("record preemption", "job", v.ID, "err", err)
			continue
		}
		d.cfg.Log.Info("preempting job", "job", v.ID, "for", w.ID, "kind", p.Kind, "restartable", v.Restartable)
		if alive, err := supervisor.Alive(v.SupervisorPID, v.SupervisorStart); err == nil && alive {
			if err := d.signalStopLocked(v); err != nil {
				d.cfg.Log.Error("signal preempted job", "job", v.ID, "err", err)
			}
		}
	}
	d.notifyLocked()
}

// preemptNoteLocked says, for w, the head of the queue, what preemption
// does for it: victims on their way out, or running jobs protected for now
// by the minimum runtime (as the cycle's outcome for w names them). ""
// when neither.
func (d *Daemon) preemptNoteLocked(w api.Job, o cycle.Outcome, jobs []api.Job) string {
	if d.cfg.DisablePreemption {
		return ""
	}
	var out []string
	for _, j := range jobs {
		if j.State == api.Running && j.Preempt != nil && j.Preempt.By == w.ID {
			out = append(out, j.ID)
		}
	}
	if len(out) > 0 {
		return "preempting " + strings.Join(out, ", ") + "; starts once they exit"
	}
	if len(o.Protected) == 0 {
		return ""
	}
	for _, v := range o.Protected {
		out = append(out, v.ID)
	}
	return fmt.Sprintf("%s could be preempted once running for the minimum runtime (%s)", strings.Join(out, ", "), d.cfg.PreemptionMinRuntime)
}

// preemptedOutcome applies a preemption to a job whose process has ended:
// a restartable job goes back to the queue (its submission order is kept;
// its wait, for aging, starts again, so it cannot take back the room made
// for its preemptor), any other ends as Preempted. A job that
// succeeded anyway, or was stopped meanwhile, keeps that outcome.
func (d *Daemon) preemptedOutcome(j *api.Job) {
	if j.Preempt == nil {
		return
	}
	p := *j.Preempt
	j.Preempt = nil
	if j.StopRequested || j.State == api.Succeeded {
		return
	}
	j.Preemptions++
	j.LastPreemption = &p
	if !j.Restartable {
		j.State = api.Preempted
		switch {
		case j.ExitCode == nil:
			// SIGTERM reached the supervisor before it was ready: the job
			// had not started.
			j.Reason = p.Reason + " (before the job had started)"
		case j.Reason != "":
			j.Reason = p.Reason + " (" + j.Reason + ")"
		default:
			j.Reason = p.Reason
		}
		return
	}
	now := d.cfg.Now().UTC()
	j.State, j.Reason, j.Requeued = api.Queued, "re-queued after being "+p.Reason, &now
	j.Started, j.Finished, j.ExitCode = nil, nil, nil
	j.Node, j.GPUs, j.Shares = 0, nil, nil
	j.SupervisorPID, j.SupervisorStart = 0, 0
}
