package hostd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// ErrFinished is returned (wrapped) when stopping a job that already ended.
var ErrFinished = errors.New("job already finished")

// Jobs returns every job in submission order.
func (d *Daemon) Jobs() ([]api.Job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.store.List()
}

// View is j as a caller may see it. A job's environment is shown only
// when asked (withEnv) and only to those who may manage the job (its
// owner, the daemon's user, root: manage); to anyone else the command is
// reduced to its program's file name and the working folder left out, as
// both may hold secrets (a token in an argument, a user's folder name).
// Env and Dir are otherwise unchanged: the record is never altered.
func View(j api.Job, manage, withEnv bool) api.Job {
	if !manage || !withEnv {
		j.EnvFiltered = len(j.Env) > 0
		j.Env = nil
	}
	if !manage {
		j.Command = ProgramOnly(j.Command)
		j.Dir = ""
		j.Filtered = true
	}
	return j
}

// ProgramOnly is a command line reduced to its program's file name.
func ProgramOnly(command []string) []string {
	if len(command) == 0 {
		return nil
	}
	return []string{filepath.Base(command[0])}
}

// Job returns one job (an error wrapping store.ErrNotFound when unknown).
func (d *Daemon) Job(id string) (api.Job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.store.Get(id)
}

// Wait blocks until job id is in a final state or ctx ends.
func (d *Daemon) Wait(ctx context.Context, id string) (api.Job, error) {
	for {
		d.mu.Lock()
		j, err := d.store.Get(id)
		ch := d.changed
		d.mu.Unlock()
		if err != nil || j.State.Final() {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("wait for %s: %w", id, ctx.Err())
		case <-ch:
		}
	}
}

// Stop stops a job: a queued job leaves the queue; a running job's
// supervisor is sent SIGTERM, forwards it to the job's process group and
// sends SIGKILL after the stop grace period (the daemon ends the job
// itself when the supervisor has not by then: tend).
func (d *Daemon) Stop(id string) (api.Job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.store.Get(id)
	if err != nil {
		return api.Job{}, err
	}
	switch j.State {
	case api.Queued:
		now := d.cfg.Now().UTC()
		j.State, j.Finished, j.Reason, j.StopRequested = api.Stopped, &now, "stopped before it started", true
	case api.Running:
		j.StopRequested = true
	default:
		return j, fmt.Errorf("stop %s: %w (%s)", id, ErrFinished, j.State)
	}
	if err := d.store.Put(j); err != nil {
		return api.Job{}, err
	}
	if j.State == api.Stopped {
		d.core.Remove(j.ID) // it leaves the queue
	}
	if j.State == api.Running {
		d.restampLocked(j) // never a victim now
		alive, err := supervisor.Alive(j.SupervisorPID, j.SupervisorStart)
		if err == nil && alive {
			if err := d.signalStopLocked(j); err != nil {
				return j, fmt.Errorf("stop %s: signal supervisor: %w", id, err)
			}
		}
	}
	d.cfg.Log.Info("job stop requested", "job", id, "state", j.State)
	d.notifyLocked()
	d.poke()
	return j, nil
}

// Queue returns the waiting jobs in start order with why each waits, as
// the daemon's scheduling core decided in its last pass (scheduleLocked).
// When a job changed since that pass and Run's loop is running, the pass
// the change poked runs here first (under the lock the loop takes), so
// the answer is the core's decision on the jobs as they are, never a
// cycle of its own; a daemon whose loop is not running runs no pass.
func (d *Daemon) Queue() ([]api.QueueEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.looping && d.last.after != d.changed {
		d.scheduleLocked()
	}
	jobs, err := d.store.List()
	if err != nil {
		return nil, err
	}
	queued := map[string]api.Job{}
	for _, j := range jobs {
		if j.State == api.Queued {
			queued[j.ID] = j
		}
	}
	waiting, considered, waits := d.last.waiting(queued)
	out := make([]api.QueueEntry, 0, len(waiting))
	for i, j := range waiting {
		e := api.QueueEntry{Position: i + 1, ID: j.ID, Queue: j.Queue, Priority: j.Priority, Request: describe(j), Preemptions: j.Preemptions}
		switch {
		case i >= considered:
			// Only when no pass could run (Run's loop is not running,
			// the cycle failed): no order or reason is known for it.
			e.Reason = "queued; not yet considered by a scheduling pass"
		case i > 0:
			e.Reason = "behind " + waiting[0].ID + " (jobs start in priority order, then submission order; no overtaking)"
		default:
			e.Reason = d.headReasonLocked(j, waits, jobs)
		}
		if j.LastPreemption != nil {
			e.Reason = fmt.Sprintf("re-queued after preemption by %s (%d so far); %s", j.LastPreemption.By, j.Preemptions, e.Reason)
		}
		out = append(out, e)
	}
	return out, nil
}

// waiting is the queued jobs the pass considered, in the order it served
// them: those it placed, then those that wait, as a strict cycle takes
// them (Ready.Order alone is the order within each queue, before fair
// share interleaves the queues), then any it left out (backing off);
// then, from index considered on, the queued jobs it never saw, in
// submission order. waits are the pass's Waits by ID.
func (p pass) waiting(queued map[string]api.Job) (order []api.Job, considered int, waits map[string]dispatch.Wait) {
	seen := map[string]bool{}
	add := func(id string) {
		if j, ok := queued[id]; ok && !seen[id] {
			seen[id] = true
			order = append(order, j)
		}
	}
	for _, b := range p.ready.Binds {
		add(b.ID)
	}
	waits = make(map[string]dispatch.Wait, len(p.ready.Waits))
	for _, w := range p.ready.Waits {
		add(w.ID)
		waits[w.ID] = w
	}
	for _, id := range p.ready.Order {
		add(id)
	}
	considered = len(order)
	var rest []api.Job
	for id, j := range queued {
		if !seen[id] {
			rest = append(rest, j)
		}
	}
	sort.Slice(rest, func(a, b int) bool { return rest[a].Seq < rest[b].Seq })
	return append(order, rest...), considered, waits
}

// headReasonLocked says why j, the head of the queue, waits, from the
// last pass's Wait for it (none: the pass placed it but could not book
// it, a bug it logged; the next pass tries again).
func (d *Daemon) headReasonLocked(j api.Job, waits map[string]dispatch.Wait, jobs []api.Job) string {
	w, waiting := waits[j.ID]
	switch {
	case !waiting:
		return "placed by the last scheduling pass, which could not book it; tried again at the next pass"
	case w.Status == cycle.QueueLimit:
		return queueLimitWords(j, w, d.last.queues, d.last.usage)
	case w.Status == cycle.Behind:
		return w.Message // the engine's words name the job it waits behind
	}
	pod := podOf(j)
	_, err := d.policy.Place(d.engine(), &pod) // the engine's account of the misfit, for waitReason
	reason := "waiting for GPU capacity: " + waitReason(j, err)
	if note := d.preemptNoteLocked(j, w.Outcome, jobs); note != "" {
		reason += "; " + note
	}
	return reason
}

// Queues returns every queue (configured ones, default, and any other in
// use) with its usage and fair-share position, by name.
func (d *Daemon) Queues() ([]api.QueueStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jobs, err := d.store.List()
	if err != nil {
		return nil, err
	}
	names := []string{}
	running, waiting := map[string]int{}, map[string]int{}
	for _, j := range jobs {
		switch j.State {
		case api.Running:
			running[queueing.QueueOr(j.Queue)]++
		case api.Queued:
			waiting[queueing.QueueOr(j.Queue)]++
		default:
			continue
		}
		names = append(names, queueing.QueueOr(j.Queue))
	}
	tree := queueTree(d.cfg.Queues, names)
	ledger := tree.NewLedger(d.core.Books().Capacity(), d.core.Books().Usage())
	out := []api.QueueStatus{}
	for _, name := range tree.Names() {
		q, _ := tree.Queue(name)
		out = append(out, api.QueueStatus{
			Name: name, Parent: q.Parent, Configured: d.configured(name), Priority: q.Priority, Weight: q.Weight,
			Guaranteed: q.Guaranteed, Limit: q.Limit, Used: ledger.Used(name), Share: ledger.Share(name),
			Running: running[name], Waiting: waiting[name], IdleReclaimAfterSeconds: int64(q.IdleReclaimAfter / time.Second),
		})
	}
	return out, nil
}

func describe(j api.Job) string {
	g := j.GPU
	if g.MIGProfile != "" {
		return fmt.Sprintf("%dx MIG %s", g.Count, g.MIGProfile)
	}
	s := fmt.Sprintf("%d GPU", g.Count)
	if g.ComputeMilli > 0 && g.ComputeMilli < request.Whole {
		s = fmt.Sprintf("%dx %s GPU", g.Count, quantity.FormatShare(g.ComputeMilli))
	}
	if g.MemoryMiB > 0 {
		s += " " + quantity.FormatMiB(g.MemoryMiB)
	}
	return s
}

// Status returns the live GPU bookings and job counts.
func (d *Daemon) Status() (api.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jobs, err := d.store.List()
	if err != nil {
		return api.Status{}, err
	}
	st := api.Status{Source: d.cfg.Source, Simulated: d.cfg.Simulated, StateDir: d.cfg.StateDir, Sharing: sharingName(d.cfg.Sharing)}
	onGPU := map[[2]int][]string{}
	var running []api.Job
	for _, j := range jobs {
		switch j.State {
		case api.Queued:
			st.Queued++
		case api.Running:
			st.Running++
			running = append(running, j)
			for _, gi := range j.GPUs {
				onGPU[[2]int{j.Node, gi}] = append(onGPU[[2]int{j.Node, gi}], j.ID)
			}
		}
	}
	for ni := range d.cfg.Nodes {
		n := &d.engine().Nodes[d.at(ni)]
		for gi, g := range n.GPUs {
			uuid := ""
			if ig, ok := d.cfg.Nodes[ni].GPUByIndex(g.Index); ok {
				uuid = ig.UUID
			}
			st.GPUs = append(st.GPUs, api.GPUStatus{
				Node: n.Name, Index: g.Index, UUID: uuid, Model: g.Model,
				MemoryMiB: g.MemoryMiB, FreeMemoryMiB: g.FreeMemoryMiB,
				FreeFraction: float64(g.FreeMilli) / request.Whole, Jobs: onGPU[[2]int{ni, gi}],
				MIG: d.migStatusLocked(ni, gi, running),
			})
		}
	}
	return st, nil
}

// sharingName is how status names the arbiter's mode: the node agent's
// --sharing value ("shared" for launch tokens, "mps").
func sharingName(m arbiter.Mode) string {
	if m == arbiter.ModeMPS {
		return "mps"
	}
	return "shared"
}

// queueLimitWords says, in this host's words, why j waits for its queue's
// hard limit (or an ancestor's), as the cycle's Wait w found it on the
// frame's queue tree and usage.
func queueLimitWords(j api.Job, w dispatch.Wait, tree *queueing.Tree, usage map[string]queueing.Resources) string {
	need := jobNeed(j)
	for _, q := range tree.Ancestry(queueOf(j)) {
		conf, _ := tree.Queue(q)
		used := usage[q]
		if lim := conf.Limit.GPUMilli; lim > 0 && used.GPUMilli+need.GPUMilli > lim {
			return fmt.Sprintf("waiting for queue %s's limit: its jobs use %s GPU of its limit %s, and this job needs %s more (limits are set in the file given to tessera up --config)",
				q, quantity.FormatShare(used.GPUMilli), quantity.FormatShare(lim), quantity.FormatShare(need.GPUMilli))
		}
	}
	return "waiting for its queue's limit: " + w.Message
}

// Fragmentation is the host's expected fragmentation, the simulator's
// measure (placement.ClusterFragmentation): the free GPU compute, in
// thousandths of a GPU, that the typical jobs the placement policy has
// seen could not use, with the free GPU compute it is part of and the
// number of typical job shapes; shapes is 0 (and milli 0) while the
// policy has seen none.
func (d *Daemon) Fragmentation() (milli float64, free int64, shapes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.engine()
	for i := range c.Nodes {
		for _, g := range c.Nodes[i].GPUs {
			free += g.FreeMilli
		}
	}
	dist := placement.TypicalOf(d.policy)
	if len(dist) == 0 {
		return 0, free, 0
	}
	return placement.ClusterFragmentation(c, dist), free, len(dist)
}
