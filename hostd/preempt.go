package hostd

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/queue"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// usage is what each queue's running jobs hold.
func usage(jobs []api.Job) map[string]queueing.Resources {
	used := map[string]queueing.Resources{}
	for _, j := range jobs {
		if j.State != api.Running {
			continue
		}
		q := queueOr(j.Queue)
		for _, s := range j.Shares {
			used[q] = used[q].Add(queueing.Resources{GPUMilli: s.ComputeMilli, GPUMemoryMiB: s.MemoryMiB})
		}
	}
	return used
}

func queueOr(q string) string {
	if q == "" {
		return queueing.DefaultQueue
	}
	return q
}

// preemptionRules are package preemption's rules with this host's queues
// and their usage (for reclaim).
func (d *Daemon) preemptionRules(jobs []api.Job) preemption.Rules {
	used := usage(jobs)
	names := make([]string, 0, len(jobs))
	for _, j := range jobs {
		names = append(names, queueOr(j.Queue))
	}
	tree := queue.Tree(d.cfg.Queues, names)
	return preemption.Rules{
		MinRuntime: d.cfg.PreemptionMinRuntime,
		Fair:       &preemption.Fairness{Tree: tree, Ledger: tree.NewLedger(d.capacity(), used)},
	}
}

// victimPlan is the jobs to stop so a waiting job fits, with why each.
type victimPlan struct {
	victims []api.Job
	kinds   []preemption.Kind
}

// planPreemptionLocked finds the running jobs whose stopping lets w start,
// by package preemption's rules: per node, candidates are released from a
// copy of the bookings in eviction order until w fits; the node needing the
// fewest victims wins.
func (d *Daemon) planPreemptionLocked(w api.Job, jobs []api.Job, rules preemption.Rules, now time.Time) (victimPlan, bool) {
	waiting := preemption.Waiting{Queue: queueOr(w.Queue), Priority: int32(w.Priority), Need: jobNeed(w)}
	byID := map[string]api.Job{}
	perNode := map[int][]preemption.Candidate{}
	for _, j := range jobs {
		if j.State != api.Running || j.StopRequested || j.Preempt != nil {
			continue
		}
		c := preemption.Candidate{ID: j.ID, Queue: queueOr(j.Queue), Priority: int32(j.Priority)}
		if j.Started != nil {
			c.Started = *j.Started
		}
		byID[j.ID] = j
		perNode[j.Node] = append(perNode[j.Node], c)
	}
	pod := podOf(w)
	var best *preemption.Plan
	for ni := range d.cluster.Nodes {
		eligible := rules.Eligible(waiting, perNode[ni], now)
		if len(eligible) == 0 {
			continue
		}
		what := d.cluster.Clone()
		release := func(c preemption.Candidate) error {
			v := byID[c.ID]
			vp := podOf(v)
			if err := what.Release(&vp, decisionOf(v)); err != nil {
				return fmt.Errorf("release %s: %w", v.ID, err)
			}
			return nil
		}
		fits := func() bool {
			_, err := d.probe.Place(what, &pod)
			return err == nil
		}
		victims, ok := preemption.Victims(eligible, nil, release, fits)
		if !ok {
			continue
		}
		p := preemption.Plan{Node: ni, Victims: victims}
		if best == nil || preemption.Better(p, *best) {
			best = &p
		}
	}
	if best == nil {
		return victimPlan{}, false
	}
	var vp victimPlan
	for _, c := range best.Victims {
		vp.victims = append(vp.victims, byID[c.ID])
		vp.kinds = append(vp.kinds, rules.Why(waiting, c, now))
	}
	return vp, true
}

// preemptLocked tries to make room for w, the head of the queue, which
// does not fit: it marks the victims (persisted, so a restart keeps the
// reason) and sends their supervisors SIGTERM (SIGKILL follows after the
// stop grace). While earlier victims are still exiting it waits for them.
func (d *Daemon) preemptLocked(w api.Job, jobs []api.Job) {
	if d.cfg.DisablePreemption {
		return
	}
	for _, j := range jobs {
		if j.State == api.Running && j.Preempt != nil {
			return // wait for the victims already on their way out
		}
	}
	now := d.cfg.Now()
	plan, ok := d.planPreemptionLocked(w, jobs, d.preemptionRules(jobs), now)
	if !ok {
		return
	}
	for i, v := range plan.victims {
		p := &api.Preemption{By: w.ID, Kind: plan.kinds[i].String(), At: now.UTC()}
		switch plan.kinds[i] {
		case preemption.ByReclaim:
			p.Reason = fmt.Sprintf("preempted by %s of queue %s, which is below its guaranteed share, to reclaim GPU capacity from queue %s, which is above its own", w.ID, queueOr(w.Queue), queueOr(v.Queue))
		default:
			p.Reason = fmt.Sprintf("preempted by %s (priority %d) of queue %s; this job's priority is %d", w.ID, w.Priority, queueOr(w.Queue), v.Priority)
		}
		v.Preempt = p
		if err := d.store.Put(v); err != nil {
			d.cfg.Log.Error("record preemption", "job", v.ID, "err", err)
			continue
		}
		d.cfg.Log.Info("preempting job", "job", v.ID, "for", w.ID, "kind", p.Kind, "restartable", v.Restartable)
		if alive, err := supervisor.Alive(v.SupervisorPID, v.SupervisorStart); err == nil && alive {
			if err := syscall.Kill(v.SupervisorPID, syscall.SIGTERM); err != nil {
				d.cfg.Log.Error("signal preempted job", "job", v.ID, "err", err)
			}
		}
	}
	d.notifyLocked()
}

// preemptNoteLocked says, for the head of the queue, what preemption does
// for it: victims on their way out, or running jobs protected for now by
// the minimum runtime. "" when neither.
func (d *Daemon) preemptNoteLocked(w api.Job, jobs []api.Job) string {
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
	if d.cfg.PreemptionMinRuntime <= 0 {
		return ""
	}
	rules := d.preemptionRules(jobs)
	now := d.cfg.Now()
	if _, ok := d.planPreemptionLocked(w, jobs, rules, now); ok {
		return ""
	}
	rules.MinRuntime = 0
	plan, ok := d.planPreemptionLocked(w, jobs, rules, now)
	if !ok {
		return ""
	}
	for _, v := range plan.victims {
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
