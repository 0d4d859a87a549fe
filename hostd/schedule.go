package hostd

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/jobenv"
	"github.com/tessera-gpu/tessera/hostd/queue"
	"github.com/tessera-gpu/tessera/hostd/store"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// schedule starts waiting jobs strictly in queue order through the
// scheduling cycle (package cycle, Strict): it stops at the first job that
// does not fit (no backfill: see package queue) and stops the victims the
// cycle named for it, if any.
func (d *Daemon) schedule() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	waiting, jobs, err := d.waitingLocked()
	if err != nil {
		d.cfg.Log.Error("list queued jobs", "err", err)
		return
	}
	if len(waiting) == 0 {
		return
	}
	byID := make(map[string]api.Job, len(waiting))
	for _, j := range waiting {
		byID[j.ID] = j
	}
	outs, err := cycle.Run(d.snapshotLocked(waiting, jobs, d.cfg.PreemptionMinRuntime))
	if err != nil {
		d.cfg.Log.Error("scheduling cycle", "err", err)
		return
	}
	for _, o := range outs {
		j := byID[o.Workload]
		if o.Status != cycle.Placed {
			if len(o.Victims) > 0 {
				d.preemptLocked(j, o.Victims, jobs)
			}
			return // the head waits; Queue says why
		}
		dec := o.Decisions[0]
		if err := d.bookLocked(j, dec); err != nil {
			d.cfg.Log.Error("book placement", "job", j.ID, "err", err)
			return
		}
		d.startLocked(j, dec)
	}
}

// waitingLocked returns the queued jobs in start order, and every job.
func (d *Daemon) waitingLocked() ([]api.Job, []api.Job, error) {
	jobs, err := d.store.List()
	if err != nil {
		return nil, nil, err
	}
	byID := map[string]api.Job{}
	var items []queue.Item
	for _, j := range jobs {
		if j.State == api.Queued {
			byID[j.ID] = j
			waitingSince := j.Submitted
			if j.Requeued != nil {
				waitingSince = *j.Requeued
			}
			items = append(items, queue.Item{ID: j.ID, Queue: j.Queue, Priority: j.Priority, Seq: j.Seq, Submitted: waitingSince, Need: jobNeed(j)})
		}
	}
	used := usage(jobs)
	ordered := d.cfg.Orderer.Order(items, d.cfg.Now())
	if uo, ok := d.cfg.Orderer.(queue.UsageOrderer); ok {
		ordered = uo.OrderWithUsage(items, d.cfg.Now(), d.capacity(), used)
	}
	var out []api.Job
	for _, it := range ordered {
		out = append(out, byID[it.ID])
	}
	return out, jobs, nil
}

// arrived tells the policy, when it learns the workload online
// (placement.Observer), that job arrived: once per job, never when it is
// only placed or probed.
func (d *Daemon) arrived(j api.Job) {
	if obs, ok := d.policy.(placement.Observer); ok {
		pod := podOf(j)
		obs.Observe(&pod)
	}
}

func podOf(j api.Job) placement.Pod {
	return placement.Pod{Name: j.ID, GPU: j.GPU}
}

// sharesOf turns a decision into per-GPU shares with UUIDs.
func (d *Daemon) sharesOf(j api.Job, dec placement.Decision) ([]binding.Share, error) {
	if dec.Node < 0 || dec.Node >= len(d.cfg.Nodes) {
		return nil, fmt.Errorf("node %d out of range", dec.Node)
	}
	inv := &d.cfg.Nodes[dec.Node]
	var gpus []inventory.GPU
	for _, gi := range dec.GPUs {
		pg := d.cluster.Nodes[dec.Node].GPUs[gi]
		g, ok := inv.GPUByIndex(pg.Index)
		if !ok {
			return nil, fmt.Errorf("GPU index %d not in the inventory", pg.Index)
		}
		gpus = append(gpus, *g)
	}
	if j.GPU.MIGProfile != "" {
		return d.migShares(j, dec, gpus)
	}
	var out []binding.Share
	for _, g := range gpus {
		s := binding.Share{UUID: g.UUID, Index: g.Index}
		if j.GPU.Exclusive {
			s.ComputeMilli, s.ComputeLimitMilli = request.Whole, request.Whole
			s.MemoryMiB, s.MemoryLimitMiB = g.MemoryMiB, g.MemoryMiB
		} else {
			s.ComputeMilli, s.ComputeLimitMilli = j.GPU.ResolveCompute(g.MemoryMiB)
			s.MemoryMiB, s.MemoryLimitMiB = j.GPU.ResolveMemory(g.MemoryMiB)
		}
		out = append(out, s)
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

// capacity is the host's GPU compute and memory, for fair shares.
func (d *Daemon) capacity() queueing.Resources {
	var r queueing.Resources
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			r.GPUMilli += request.Whole
			r.GPUMemoryMiB += g.MemoryMiB
		}
	}
	return r
}
