package hostd

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// MIG on the host daemon (docs/mig.md, "What a front door does"): a MIG
// request (--mig, count instances of one profile) goes to the placement
// engine as it is. The engine places it on a free instance of the profile
// on a GPU in MIG mode, or, on a GPU whose layout Tessera manages
// (migManaged in a simulated nodes file), at the start slot its MIG
// planner chooses for a new instance; a GPU in MIG mode never takes a
// fractional or whole-GPU job, and a MIG job never lands on a GPU that is
// not in MIG mode. The engine books the instance (it is in use while the
// job runs) and releases it when the job ends, removing an instance it
// created.
//
// With Config.MIG (a migctl.Manager over NVML, for the GPUs tessera up
// --mig-managed names) the daemon creates the chosen instance through the
// driver before the job starts (startLocked), destroys it once the job's
// processes are gone (finish), and after a restart adopts the instances of
// running jobs and destroys those of jobs that ended while it was down
// (reconcileMIG). Without it, creating an instance is simulated: on a
// simulated host the new instance is named MIG-<parent GPU UUID>/c<start
// slot> (the c keeps it apart from the configured instances,
// MIG-<parent GPU UUID>/<ordinal>); on real GPUs nothing is managed, so
// the engine never asks for a creation there.

// checkMIG says in host words why a MIG request cannot be served by this
// host's GPUs in MIG mode: the host has none (of the allowed models), or
// none of them offers the profile. The error is an *InputError on the
// mig-profile field (the --mig flag).
func (d *Daemon) checkMIG(gpu request.GPU) error {
	var migModels, capable, offered []string
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			if len(gpu.Models) > 0 && !slices.Contains(gpu.Models, g.Model) {
				continue
			}
			m, ok := d.cfg.Catalog.Lookup(g.Model)
			if g.MIGMode != inventory.MIGEnabled {
				if ok && m.SupportsMIG() && !slices.Contains(capable, m.Name) {
					capable = append(capable, m.Name)
				}
				continue
			}
			if !slices.Contains(migModels, g.Model) {
				migModels = append(migModels, g.Model)
			}
			if !ok || !m.SupportsMIG() {
				// Unknown geometry: only existing instances can be used.
				for _, in := range g.MIGInstances {
					if strings.EqualFold(in.Profile, gpu.MIGProfile) {
						return nil
					}
				}
				continue
			}
			if _, ok := m.MIGProfile(gpu.MIGProfile); ok {
				return nil
			}
			if s := m.Name + " has " + strings.Join(m.MIG.ProfileNames(), ", "); !slices.Contains(offered, s) {
				offered = append(offered, s)
			}
		}
	}
	of := ""
	if len(gpu.Models) > 0 {
		of = " of the models --model allows"
	}
	switch {
	case len(migModels) == 0 && len(capable) > 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be empty on this host, got %q: none of its GPUs%s is in MIG mode (%s support MIG, but Tessera never switches MIG mode: the operator enables it)",
			gpu.MIGProfile, of, strings.Join(capable, ", "))}
	case len(migModels) == 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be empty on this host, got %q: none of its GPUs%s is in MIG mode (none of them supports MIG)", gpu.MIGProfile, of)}
	case len(offered) == 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be a MIG profile of an instance this host's GPUs in MIG mode have, got %q", gpu.MIGProfile)}
	}
	return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be a MIG profile this host's GPUs in MIG mode offer (%s), got %q", strings.Join(offered, "; "), gpu.MIGProfile)}
}

// migEquivalent is a MIG request's equivalent share (compute slices over
// the GPU's compute slices, the profile's memory), the largest among this
// host's models that offer the profile. It only counts toward fair-share
// usage: the engine places the MIG request itself.
func (d *Daemon) migEquivalent(gpu request.GPU) *request.GPU {
	var milli, mem int64
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			m, ok := d.cfg.Catalog.Lookup(g.Model)
			if !ok || !m.SupportsMIG() || g.MIGMode != inventory.MIGEnabled {
				continue
			}
			if p, ok := m.MIGProfile(gpu.MIGProfile); ok {
				milli = max(milli, int64(p.ComputeSlices)*request.Whole/int64(m.MIG.ComputeSlices))
				mem = max(mem, p.MemoryMiB)
			}
		}
	}
	if milli == 0 {
		return nil
	}
	return &request.GPU{Count: gpu.Count, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: mem, MemoryLimitMiB: mem, Models: gpu.Models}
}

// nameCreated names the MIG instance share s asks this host to create:
// with Config.MIG the parent's UUID stays until createMIGLocked names the
// instance; on a simulated host it is simulatedMIGUUID; elsewhere nothing
// is managed and creating is an error.
func (d *Daemon) nameCreated(s *binding.Share) error {
	if s.MIG == nil || !s.MIG.Create {
		return nil
	}
	switch {
	case d.cfg.MIG != nil:
		return nil
	case d.cfg.Simulated:
		s.UUID = simulatedMIGUUID(s.MIG.GPU, s.MIG.Start)
		return nil
	}
	return fmt.Errorf("GPU %d: asked to create a MIG instance, but this daemon manages no GPU's MIG layout (tessera up --mig-managed)", s.Index)
}

// simulatedMIGUUID names an instance a simulated host creates:
// MIG-<parent>/c<start>. The "c" keeps it apart from the instances the
// nodes file configures, which discovery/simulated names
// MIG-<parent>/<ordinal>.
func simulatedMIGUUID(parent string, start int) string {
	return fmt.Sprintf("MIG-%s/c%d", parent, start)
}

// migChoices rebuilds a MIG job's engine choices from its shares: an
// instance created for the job is booked again as created at its start
// (the snapshot, built from the configured layout, does not have it), an
// existing one by its UUID.
func migChoices(j api.Job) []placement.MIGChoice {
	if !isMIG(j) {
		return nil
	}
	var out []placement.MIGChoice
	for _, s := range j.Shares {
		switch {
		case s.MIG == nil:
			// A record from before exact MIG placement: its instance is
			// unknown to the engine.
			return nil
		case s.MIG.Create:
			out = append(out, placement.MIGChoice{Start: s.MIG.Start, Create: true})
		default:
			out = append(out, placement.MIGChoice{Start: s.MIG.Start, UUID: s.UUID})
		}
	}
	return out
}

// MIGInstances creates and destroys the MIG instances of jobs on GPUs
// whose layout Tessera manages (migctl.Manager), by job ID.
type MIGInstances interface {
	// Journal keeps the bookings in a file of the state folder and
	// returns an earlier daemon's.
	Journal(path string) (map[string][]migctl.Want, error)
	// Reconcile adopts the instances of running jobs and destroys those of
	// ended ones (unless in use) after a restart.
	Reconcile(wanted, ended map[string][]migctl.Want) (migctl.Report, error)
	Acquire(workload string, w migctl.Want) (migctl.Instance, error)
	Release(workload string) error
	Workloads() []string
	// Layout re-reads the managed GPUs' instances from the driver, each
	// with the job run holding it (migWorkload).
	Layout() (map[string][]migctl.Placed, error)
}

// MIGJournalFile is, in the state folder, where the MIG instances created
// for jobs are booked (migctl.Manager.Journal).
const MIGJournalFile = "mig-instances.json"

// migWorkload names a job's run to the MIG manager: a restartable job
// preempted while its instance is still in use starts its next run on a
// new instance, and the two are never released together.
func migWorkload(jobID string, run int) string { return fmt.Sprintf("%s/run%d", jobID, run) }

// migRelease is a run whose MIG instances could not be destroyed yet.
type migRelease struct {
	job string
	// dec is the run's engine booking, kept until its instances are
	// destroyed (so no job is placed on slices still taken); nil when the
	// run was not booked (it ended while no daemon ran).
	dec *placement.Decision
}

// createMIGLocked creates, through Config.MIG, each instance run `run` of
// job j asks to create, and names it in the shares. On a failure nothing
// created for it is kept.
func (d *Daemon) createMIGLocked(j api.Job, run int, shares []binding.Share) ([]binding.Share, error) {
	if d.cfg.MIG == nil {
		return shares, nil
	}
	out := slices.Clone(shares)
	for i, s := range out {
		if s.MIG == nil || !s.MIG.Create {
			continue
		}
		inst, err := d.cfg.MIG.Acquire(migWorkload(j.ID, run), migctl.WantOf(s))
		if err != nil {
			d.releaseMIGLocked(migWorkload(j.ID, run), j.ID, nil)
			return nil, fmt.Errorf("GPU %d: create MIG instance %s at slice %d: %w", s.Index, s.MIGProfile, s.MIG.Start, err)
		}
		out[i].UUID = inst.UUID
		d.migStale = true
	}
	return out, nil
}

// releaseMIGLocked destroys the instances created for workload (a run of
// job) and reports whether none is left; one still in use stays booked
// and is retried while the daemon runs (retryMIG), with the run's engine
// booking dec (nil: none) released once it is destroyed.
func (d *Daemon) releaseMIGLocked(workload, job string, dec *placement.Decision) bool {
	if d.cfg.MIG == nil {
		return true
	}
	d.migStale = true
	if err := d.cfg.MIG.Release(workload); err != nil {
		d.cfg.Log.Warn("cannot destroy a job's MIG instances; retrying", "job", job, "run", workload, "err", err)
		if _, ok := d.migRetry[workload]; !ok {
			d.migRetry[workload] = migRelease{job: job, dec: dec}
		}
		return false
	}
	delete(d.migRetry, workload)
	return true
}

// retryMIG retries the releases that failed; once a run's instances are
// destroyed, its engine booking (kept meanwhile) is released.
func (d *Daemon) retryMIG() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w, r := range d.migRetry {
		if !d.releaseMIGLocked(w, r.job, r.dec) || r.dec == nil {
			continue
		}
		if err := d.releaseHoldLocked(w, r.job, *r.dec); err != nil {
			d.cfg.Log.Error("release placement", "job", r.job, "err", err)
		}
		d.notifyLocked()
		d.poke()
	}
}

// prepareMIG, before the snapshot is built, opens the MIG journal and
// drops from the inventory the instances an earlier daemon created for
// jobs: they are not free instances (running jobs' are booked again from
// their shares as created at their start; ended jobs' are destroyed). It
// returns the journal's bookings.
func prepareMIG(cfg *Config) (map[string][]migctl.Want, error) {
	prev, err := cfg.MIG.Journal(filepath.Join(cfg.StateDir, MIGJournalFile))
	if err != nil {
		return nil, err
	}
	booked := map[string][]int{}
	for _, ws := range prev {
		for _, w := range ws {
			booked[w.GPU] = append(booked[w.GPU], w.Start)
		}
	}
	nodes := slices.Clone(cfg.Nodes)
	for n := range nodes {
		nodes[n].GPUs = slices.Clone(nodes[n].GPUs)
		for i := range nodes[n].GPUs {
			g := &nodes[n].GPUs[i]
			g.MIGInstances = slices.DeleteFunc(slices.Clone(g.MIGInstances), func(in inventory.MIGInstance) bool {
				return in.Start != nil && slices.Contains(booked[g.UUID], *in.Start)
			})
		}
	}
	cfg.Nodes = nodes
	return prev, nil
}

// reconcileMIG, after recovery, settles the instances on managed GPUs:
// those of the jobs still running (adopted) are kept, those of jobs that
// ended while the daemon was down, or never started, are destroyed unless
// in use (then retried), and instances no job booked are left alone.
func (d *Daemon) reconcileMIG(prev map[string][]migctl.Want) {
	wanted := map[string][]migctl.Want{}
	for _, j := range d.adopted {
		for _, s := range j.Shares {
			if s.MIG != nil && s.MIG.Create {
				w := migWorkload(j.ID, j.Runs)
				wanted[w] = append(wanted[w], migctl.WantOf(s))
			}
		}
	}
	d.migStale = true
	rep, err := d.cfg.MIG.Reconcile(wanted, migctl.Ended(prev, wanted))
	if err != nil {
		d.cfg.Log.Error("MIG instances after restart: not all settled", "err", err)
	}
	if len(rep.Adopted)+len(rep.Created)+len(rep.Destroyed)+len(rep.Busy) > 0 {
		d.cfg.Log.Info("MIG instances after restart", "adopted", rep.Adopted, "created", rep.Created, "destroyed", rep.Destroyed, "busy", rep.Busy)
	}
	for _, w := range d.cfg.MIG.Workloads() {
		if _, ok := wanted[w]; !ok {
			// Not booked in the engine: the run ended while no daemon ran.
			job, _, _ := strings.Cut(w, "/run")
			d.migRetry[w] = migRelease{job: job}
		}
	}
}

// migStatusLocked lists the MIG instances of GPU gi of node ni for Status,
// with the job holding each: on a GPU whose layout Config.MIG manages, as
// the driver lists them (re-read once after creations and destructions,
// migLayoutLocked); on another GPU in MIG mode, as the engine books them
// (an instance created on a simulated host named as its job's share names
// it). jobs are the running jobs.
func (d *Daemon) migStatusLocked(ni, gi int, jobs []api.Job) []api.MIGInstanceStatus {
	g := &d.engine().Nodes[d.at(ni)].GPUs[gi]
	if g.MIG == nil {
		return nil
	}
	parent := ""
	if ig, ok := d.cfg.Nodes[ni].GPUByIndex(g.Index); ok {
		parent = ig.UUID
	}
	byUUID, byStart := map[string]string{}, map[int]binding.Share{}
	created := map[int]string{}
	for _, j := range jobs {
		if j.Node != ni {
			continue
		}
		for _, s := range j.Shares {
			switch {
			case s.MIG != nil && s.MIG.GPU == parent && s.MIG.Create:
				byStart[s.MIG.Start], created[s.MIG.Start] = s, j.ID
				byUUID[s.UUID] = j.ID
			case s.MIG != nil || s.MIGProfile != "":
				byUUID[s.UUID] = j.ID
			}
		}
	}
	if placed, ok := d.migLayoutLocked()[parent]; ok {
		out := make([]api.MIGInstanceStatus, 0, len(placed))
		for _, p := range placed {
			st := api.MIGInstanceStatus{Profile: p.Profile, Start: p.Start, UUID: p.UUID, MemoryMiB: p.MemoryMiB}
			if p.Workload != "" {
				st.Job, _, _ = strings.Cut(p.Workload, "/run")
			} else if p.UUID != "" {
				st.Job = byUUID[p.UUID]
			}
			st.InUse = p.Workload != "" || st.Job != ""
			out = append(out, st)
		}
		return out
	}
	out := make([]api.MIGInstanceStatus, 0, len(g.MIG.Instances))
	for _, in := range g.MIG.Instances {
		st := api.MIGInstanceStatus{Profile: in.Profile, Start: in.Start, UUID: in.UUID, InUse: in.InUse}
		if p, ok := d.cfg.Catalog.Lookup(g.Model); ok && p.SupportsMIG() {
			if mp, ok := p.MIGProfile(in.Profile); ok {
				st.MemoryMiB = mp.MemoryMiB
			}
		}
		switch {
		case in.UUID != "":
			st.Job = byUUID[in.UUID]
		case in.Start >= 0 && created[in.Start] != "":
			st.Job, st.UUID = created[in.Start], byStart[in.Start].UUID
		}
		if !in.InUse {
			st.Job = ""
		}
		out = append(out, st)
	}
	return out
}

// migLayoutLocked is the managed GPUs' layout as the driver listed it
// last, listed again when an instance was created or destroyed since (one
// re-read for any number of changes); a failed read keeps the last and is
// retried at the next call.
func (d *Daemon) migLayoutLocked() map[string][]migctl.Placed {
	if d.cfg.MIG == nil {
		return nil
	}
	if d.migStale {
		layout, err := d.cfg.MIG.Layout()
		if err != nil {
			d.cfg.Log.Warn("cannot read the MIG layout of the managed GPUs", "err", err)
			return d.migLayout
		}
		d.migLayout, d.migStale = layout, false
	}
	return d.migLayout
}
