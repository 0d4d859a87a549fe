package hostd

import (
	"time"

	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/queueing"
)

// IdleReporter is implemented by an Arbiter (Config.Arbiter) that marks
// idle holders; ArbiterSeat does. The daemon reads the marks only while
// some queue reclaims idle holders (queueing.Queue.IdleReclaimAfter).
type IdleReporter interface {
	// IdleSeats is, for each seat (job ID, GPU UUID) idle now, since when.
	IdleSeats() map[[2]string]time.Time
}

// IdleSeats implements IdleReporter from the arbiter's last step.
func (s ArbiterSeat) IdleSeats() map[[2]string]time.Time {
	a := s.Enforcer.Arbiter
	if a == nil {
		return nil
	}
	out := map[[2]string]time.Time{}
	for _, st := range a.Snapshot() {
		if st.Idle != nil {
			out[[2]string{st.Key, st.GPU}] = st.Idle.Since
		}
	}
	return out
}

// idleMarksLocked gives f the running jobs' idle marks when some queue of
// f reclaims idle holders, preemption is on and the arbiter marks them;
// otherwise it reads nothing. A job is an idle holder when it is idle on
// every GPU it holds (a GPU the arbiter does not seat, a MIG instance or
// one under MPS, is never idle), since the latest of its GPUs' marks.
func (d *Daemon) idleMarksLocked(f *dispatch.Frame, jobs []api.Job) {
	r, ok := d.cfg.Arbiter.(IdleReporter)
	if !ok || d.cfg.DisablePreemption || f.Queues == nil || !f.Queues.IdleReclaims() {
		return
	}
	seats := r.IdleSeats()
	since := map[string]time.Time{}
	for _, j := range jobs {
		if j.State != api.Running || len(j.Shares) == 0 {
			continue
		}
		var latest time.Time
		idle := true
		for _, sh := range j.Shares {
			s, ok := seats[[2]string{j.ID, sh.UUID}]
			if !ok {
				idle = false
				break
			}
			if s.After(latest) {
				latest = s
			}
		}
		if idle {
			since[j.ID] = latest
		}
	}
	f.IdleSince = func(id string) time.Time { return since[id] }
}

// idleReclaimAfter is the configured idleReclaimAfter of queue name (0:
// none), for the words of a stop.
func (d *Daemon) idleReclaimAfter(name string) time.Duration {
	name = queueing.QueueOr(name)
	for _, q := range d.cfg.Queues {
		if q.Name == name {
			return q.IdleReclaimAfter
		}
	}
	return 0
}
