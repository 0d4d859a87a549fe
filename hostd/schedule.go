package hostd

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/jobenv"
	"github.com/tessera-gpu/tessera/hostd/store"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// schedule runs one scheduling cycle through the scheduling core (package
// dispatch, strict: it stops at the first job that does not fit, with no
// backfill) and carries out what it decided: it starts the jobs placed
// and stops the victims named for the first that waits, if any.
func (d *Daemon) schedule() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scheduleLocked()
}

// pass is what the daemon's last scheduling pass decided, kept for Queue
// so that `tessera queue` says what the core decided rather than a cycle
// of its own.
type pass struct {
	ready dispatch.Ready
	// queues and usage are the frame's, for the words of a queue limit.
	queues *queueing.Tree
	usage  map[string]queueing.Resources
	// after is d.changed once the pass was carried out in full: another
	// channel there means a job changed since (a submission, a stop, an
	// exit), and nil that the pass left work undone (a booking failed, a
	// job was dropped), so its answer is no longer the core's.
	after chan struct{}
}

// scheduleLocked is schedule with d.mu held; it records the pass in d.last.
func (d *Daemon) scheduleLocked() {
	if d.closed {
		return
	}
	if d.core.Len() == 0 {
		d.last = pass{after: d.changed} // nothing waits
		return
	}
	d.last = pass{} // until this pass is carried out
	jobs, err := d.store.List()
	if err != nil {
		d.cfg.Log.Error("list jobs", "err", err)
		return
	}
	f, queued := d.frameLocked(jobs)
	now := d.cfg.Now()
	used := d.core.Books().Usage() // the cycle's (its frame has none of its own)
	rd, err := d.core.Cycle(now, f)
	if err != nil {
		d.cfg.Log.Error("scheduling cycle", "err", err)
		d.rebookLocked(jobs)
		return
	}
	d.last = pass{ready: rd, queues: f.Queues, usage: used}
	for i, b := range rd.Binds {
		j, dec := queued[b.ID], b.Decisions[0]
		dec.Node = d.node[dec.Node] // a job records its node by configured position
		if err := d.bookLocked(j, dec); err != nil {
			d.cfg.Log.Error("book placement", "job", j.ID, "err", err)
			for _, rest := range rd.Binds[i:] {
				d.core.BindFailed(rest.ID, now) // still queued, in order: none overtakes it
			}
			return
		}
		d.startLocked(j, dec)
		d.core.Bound(j.ID) // running, or failed to start: it left the queue either way
	}
	for _, e := range rd.Evictions {
		d.preemptLocked(queued[e.For], e.Victims, jobs)
	}
	dropped := false // the jobs behind a dropped one waited for it: Behind
	for _, w := range rd.Waits {
		if w.Cause == dispatch.CauseRefused {
			// Only a job the core holds that is not queued is refused:
			// a missed event, which must not hold up the queue.
			d.cfg.Log.Error("the scheduling core held a job that is not queued; dropped", "job", w.ID, "err", w.Err)
			d.core.Remove(w.ID)
			d.poke()
			dropped = true
		}
	}
	if !dropped {
		d.last.after = d.changed
	}
}

// coreConfig is the scheduling core's rules on this host: one strict order
// across queues (fair share between them; priority, aged by
// Config.AgingStep, then submission within one), preemption unless
// disabled, no backoff (a job that does not fit is tried at every pass)
// and no reservation (the strict order already keeps a large job from
// being overtaken). A preemptor does not wait on the core's clock: while
// any victim is on its way out no job names more (frameLocked).
func coreConfig(cfg Config) dispatch.Config {
	return dispatch.Config{Strict: true, AgingStep: max(cfg.AgingStep, 0), Preemption: !cfg.DisablePreemption, MinRuntime: cfg.PreemptionMinRuntime, Noun: "job"}
}

// itemOf is queued job j as the scheduling core orders it: by priority,
// aged from when it began to wait (its submission, or its re-queueing
// after a preemption, so it cannot take back the room made for its
// preemptor), then by submission sequence.
func itemOf(j api.Job) dispatch.Item {
	since := j.Submitted
	if j.Requeued != nil {
		since = *j.Requeued
	}
	return dispatch.Item{ID: j.ID, Queue: queueOf(j), Priority: int32(j.Priority), Seq: j.Seq, Since: since}
}

// queueOf is the queue j is served in: its own, or the default queue for
// a name the queue tree rejects (an older record's).
func queueOf(j api.Job) string {
	if q := queueing.QueueOr(j.Queue); queueing.ValidName(q) {
		return q
	}
	return queueing.DefaultQueue
}

// frameLocked is the world a cycle decides on (jobs are every job): the
// policy, the queues in use and each queued job's workload; with the
// queued jobs by ID. The bookings, what the queues' running jobs hold and
// the running jobs (preemption's candidates) are the core's books, with
// their idle marks where a queue reclaims idle holders (idle.go). While
// a victim is on its way out no job names more: each waits for it
// (AwaitingVictims).
func (d *Daemon) frameLocked(jobs []api.Job) (dispatch.Frame, map[string]api.Job) {
	queued := map[string]api.Job{}
	names := make([]string, 0, len(jobs))
	leaving := false // victims on their way out: no job names more until they are gone
	for _, j := range jobs {
		names = append(names, queueing.QueueOr(j.Queue))
		switch {
		case j.State == api.Queued:
			queued[j.ID] = j
		case j.State == api.Running && j.Preempt != nil:
			leaving = true
		}
	}
	f := dispatch.Frame{Policy: d.policy, Queues: queueTree(d.cfg.Queues, names)}
	f.Translate = func(id string) (cycle.Workload, error) {
		j, ok := queued[id]
		if !ok {
			return cycle.Workload{}, fmt.Errorf("job %s is not queued", id)
		}
		return cycle.Workload{ID: j.ID, Queue: queueOf(j), Priority: int32(j.Priority), Parts: []placement.Pod{podOf(j)}, AwaitingVictims: leaving}, nil
	}
	f.Arrival = func(id string) (placement.Policy, []placement.Pod, bool) {
		j, ok := queued[id]
		return nil, []placement.Pod{podOf(j)}, ok
	}
	d.idleMarksLocked(&f, jobs)
	return f, queued
}

// arrivedRunning tells the policy, when it learns the workload online
// (placement.Observer), of a running job a restarted daemon adopts; queued
// jobs arrive through the core (Frame.Arrival), once each.
func (d *Daemon) arrivedRunning(j api.Job) {
	if obs, ok := d.policy.(placement.Observer); ok {
		pod := podOf(j)
		obs.Observe(&pod)
	}
}

func podOf(j api.Job) placement.Pod {
	return placement.Pod{Name: j.ID, GPU: j.GPU}
}

// sharesOf turns a decision into per-GPU shares with UUIDs
// (placement.Shares; a MIG instance to create is named by nameCreated).
func (d *Daemon) sharesOf(j api.Job, dec placement.Decision) ([]binding.Share, error) {
	if dec.Node < 0 || dec.Node >= len(d.cfg.Nodes) {
		return nil, fmt.Errorf("node %d out of range", dec.Node)
	}
	out, err := placement.Shares(&d.engine().Nodes[d.at(dec.Node)], &d.cfg.Nodes[dec.Node], j.GPU, dec, d.cfg.Catalog)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if err := d.nameCreated(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// startLocked starts j's supervisor on its booked decision. A job that
// cannot start is marked Failed and its booking released.
func (d *Daemon) startLocked(j api.Job, dec placement.Decision) {
	admitted := false
	run := j.Runs + 1 // the run this start makes (j.Runs is counted below)
	fail := func(err error) {
		if admitted {
			d.cfg.Arbiter.Release(j.ID)
		}
		if isMIG(j) {
			d.releaseMIGLocked(migWorkload(j.ID, run), j.ID, nil)
		}
		if rerr := d.releaseLocked(j, dec); rerr != nil {
			d.cfg.Log.Error("release placement", "job", j.ID, "err", rerr)
		}
		now := d.cfg.Now().UTC()
		j.State, j.Finished, j.Reason = api.Failed, &now, "could not start: "+err.Error()
		d.cfg.Log.Error("job failed to start", "job", j.ID, "err", err)
		if perr := d.store.Put(j); perr != nil {
			d.cfg.Log.Error("record job", "job", j.ID, "err", perr)
		}
		d.notifyLocked()
	}
	shares, err := d.sharesOf(j, dec)
	if err != nil {
		fail(err)
		return
	}
	// A managed GPU's instance is created before anything else: the job's
	// environment names it. The MIG journal records it first, so a crash
	// from here on leaves nothing behind (reconcileMIG).
	if shares, err = d.createMIGLocked(j, run, shares); err != nil {
		fail(err)
		return
	}
	dir := d.JobDir(j.ID)
	// A restartable job starts again after a preemption: its earlier
	// run's exit status must not be mistaken for this run's.
	// The job folder is opened beneath the state folder, never through a
	// link (internal/safefs), and must be the daemon user's own.
	rel := store.JobsDir + "/" + j.ID
	if err := safefs.MkdirAll(d.cfg.StateDir, rel, 0o700); err != nil {
		fail(fmt.Errorf("job folder: %w", err))
		return
	}
	if err := safefs.Remove(d.cfg.StateDir, rel+"/"+supervisor.ExitFile); err != nil {
		fail(fmt.Errorf("job folder: %w", err))
		return
	}
	user, err := d.runAs(j)
	if err != nil {
		fail(err)
		return
	}
	shm, err := d.prepareShm(j, user)
	if err != nil {
		fail(err)
		return
	}
	j.ShmDir = ""
	if d.otherUser(user) {
		j.ShmDir = shm
	}
	j.Node, j.GPUs, j.Shares = dec.Node, dec.GPUs, shares
	region := ""
	var clientEnv map[string]string
	if d.cfg.Arbiter != nil && !isMIG(j) {
		if region, err = d.cfg.Arbiter.Admit(j, shm); err != nil {
			fail(fmt.Errorf("arbiter: %w", err))
			return
		}
		admitted = true
		// In MPS mode: the job's MPS pipe folder and caps.
		if clientEnv, err = d.cfg.Arbiter.ClientEnv(context.Background(), j.ID); err != nil {
			fail(fmt.Errorf("arbiter: %w", err))
			return
		}
	}
	procs, err := d.contain.New(j.ID)
	if err != nil {
		fail(err)
		return
	}
	env := jobenv.Build(j.Env, shares, jobenv.Options{JobID: j.ID, Queue: j.Queue, ShmDir: shm, InterceptLib: j.InterceptLib, ArbiterRegion: region, GPUUUIDs: d.gpuUUIDs(dec.Node), ClientEnv: clientEnv})
	// Record the job as starting before its supervisor exists, so a daemon
	// that dies before recording the supervisor leaves a job its successor
	// settles through the run's claim (recoverStarting) instead of a queued
	// job it would run a second time.
	now := d.cfg.Now().UTC()
	j.Runs++
	j.State, j.Started, j.SupervisorPID, j.SupervisorStart = api.Running, &now, 0, 0
	if err := d.store.Put(j); err != nil {
		fail(fmt.Errorf("record starting job: %w", err))
		return
	}
	d.restampLocked(j) // its start, for the minimum runtime
	claim := supervisor.ClaimFile(dir, j.Runs)
	cmd, start, err := supervisor.Start(d.cfg.Supervisor, dir, supervisor.Spec{Command: j.Command, Env: env, Dir: j.Dir, StopGrace: d.cfg.StopGrace, Contain: procs, Claim: claim, User: user})
	if err != nil {
		if cmd != nil {
			_ = cmd.Process.Kill()
			go func() { _ = cmd.Wait() }()
		}
		fail(err)
		return
	}
	j.SupervisorPID, j.SupervisorStart = cmd.Process.Pid, start
	// Not synced: a crash that loses it leaves the starting record, whose
	// run's claim names the supervisor (recoverStarting).
	if err := d.store.PutUnsynced(j); err != nil {
		d.cfg.Log.Error("record started job", "job", j.ID, "err", err)
	}
	d.cfg.Log.Info("job started", "job", j.ID, "gpus", j.GPUs, "pid", cmd.Process.Pid)
	d.notifyLocked()
	done := make(chan struct{})
	d.children[j.ID] = done
	go d.watchChild(j.ID, cmd, done)
	go d.tendChild(&tender{id: j.ID, pid: cmd.Process.Pid, start: start}, done)
}

// runAs says whom j runs as: nil for the daemon's own user. A daemon not
// running as root cannot run a job as anyone else. A root daemon runs a
// job submitted by another user (its owner, the socket peer) as that
// user, never as root, and the jobs of root and of API token holders as
// Config.JobUser (root when unset).
func (d *Daemon) runAs(j api.Job) (*supervisor.User, error) {
	if d.euid != 0 {
		return nil, nil
	}
	if j.OwnerUID != nil && *j.OwnerUID != 0 {
		u, err := supervisor.LookupUID(*j.OwnerUID)
		if err != nil {
			return nil, fmt.Errorf("the job's user: %w", err)
		}
		return &u, nil
	}
	return d.cfg.JobUser, nil
}

// jobNeed is what a queued job will take (its GPU compute and memory as
// requested, or a MIG request's equivalent share; a memory-only share's
// compute is known once placed).
func jobNeed(j api.Job) queueing.Resources {
	g := j.GPU
	if j.EngineGPU != nil {
		g = *j.EngineGPU
	}
	n := int64(g.Count)
	return queueing.Resources{GPUMilli: n * g.ComputeMilli, GPUMemoryMiB: n * g.MemoryMiB}
}

// isMIG reports whether the job asked for MIG instances. MIG jobs are not
// registered with the node arbiter: a MIG instance is its own device.
func isMIG(j api.Job) bool { return j.GPU.MIGProfile != "" }

// gpuUUIDs maps GPU index to UUID on node ni (a MIG job's parent GPUs).
func (d *Daemon) gpuUUIDs(ni int) map[int]string {
	out := map[int]string{}
	if ni < 0 || ni >= len(d.cfg.Nodes) {
		return out
	}
	for _, g := range d.cfg.Nodes[ni].GPUs {
		out[g.Index] = g.UUID
	}
	return out
}
