package hostd

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/hostd/store"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/placement"
)

// Daemon is the host daemon's core: queue, placement, job processes.
type Daemon struct {
	cfg Config

	mu     sync.Mutex
	store  *store.Store
	empty  *placement.Cluster // nothing booked: "can this ever fit?"
	policy placement.Policy
	probe  placement.Policy // a second instance for d.empty (policies keep caches)
	closed bool
	// core is the scheduling core: the queued jobs in their order, fed by
	// events (a submission, a stop, a start, a re-queueing), and the
	// cycle (schedule). Its books are the live bookings (bookings.go).
	core *dispatch.Core
	// pos is each configured node's position in the books (they lay
	// nodes out by name), node the configured node at each position.
	pos, node []int
	// last is what the core's last cycle decided, for Queue (schedule.go);
	// looping says Run's loop runs the passes, so Queue may run one early.
	last    pass
	looping bool
	// changed is closed and replaced at every job state change.
	changed chan struct{}
	// wake asks the scheduling loop to run.
	wake chan struct{}
	// children are supervisors this daemon started (it must reap them).
	children map[string]chan struct{}
	// adopted are running jobs found at start, watched by polling.
	adopted  []api.Job
	watchers sync.WaitGroup
	// bookings journals every book and release (BookingsFile).
	bookings *journal
	// contain is where job processes are kept (cgroups, or marks only).
	contain contain.Host
	// stopping holds, by job, when its supervisor was sent SIGTERM (a stop
	// or a preemption): the daemon ends the job itself when the supervisor
	// has not ended it by the grace (tend).
	stopping map[string]time.Time
	// euid is the daemon's effective uid: only root runs jobs as others.
	euid int
	// migRetry are job runs (migWorkload) whose MIG instances could not
	// be destroyed yet.
	migRetry map[string]migRelease
	// migLayout is the managed GPUs' MIG layout as the driver listed it
	// last (Config.MIG), by GPU UUID; migStale says an instance was
	// created or destroyed since, so Status lists it again.
	migLayout map[string][]migctl.Placed
	migStale  bool
	// life ends when the daemon closes; it bounds waits for job processes.
	life    context.Context
	endLife context.CancelFunc
}

// New opens the state in cfg.StateDir and recovers jobs: queued jobs stay
// queued, running jobs whose supervisor is alive are re-adopted, and jobs
// whose supervisor vanished get their recorded exit status (or Lost).
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var migPrev map[string][]migctl.Want
	if cfg.MIG != nil {
		var err error
		if migPrev, err = prepareMIG(&cfg); err != nil {
			return nil, err
		}
	}
	cluster, err := placement.FromInventory(cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	policy, err := placement.New(cfg.Policy, placement.Options{})
	if err != nil {
		return nil, fmt.Errorf("placement policy: %w", err)
	}
	probe, err := placement.New(cfg.Policy, placement.Options{})
	if err != nil {
		return nil, fmt.Errorf("placement policy: %w", err)
	}
	core, err := dispatch.New(coreConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("scheduling core: %w", err)
	}
	st, err := store.Open(cfg.StateDir, cfg.Log)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, store: st, core: core, empty: cluster, policy: policy, probe: probe,
		changed: make(chan struct{}), wake: make(chan struct{}, 1), children: map[string]chan struct{}{},
		migRetry: map[string]migRelease{}, stopping: map[string]time.Time{}, euid: os.Geteuid(),
	}
	if err := d.setNodes(); err != nil {
		_ = st.Close()
		return nil, err
	}
	d.life, d.endLife = context.WithCancel(context.Background())
	switch cfg.Contain {
	case ContainAuto, ContainCgroup:
		var why string
		if d.contain, why = contain.Detect(cfg.StateDir); why != "" {
			if cfg.Contain == ContainCgroup {
				_ = st.Close()
				return nil, fmt.Errorf("%w: %s", ErrNoCgroup, why)
			}
			cfg.Log.Info("jobs are tracked by their environment mark only", "why", why)
		}
		// Other daemons' folders left empty (on state folders no daemon runs on).
		removed, err := d.contain.SweepStale()
		if err != nil {
			cfg.Log.Warn("remove stale daemon cgroups", "err", err)
		}
		if len(removed) > 0 {
			cfg.Log.Info("removed empty cgroup folders of earlier daemons", "folders", removed)
		}
	case ContainMark:
	default:
		_ = st.Close()
		return nil, fmt.Errorf("job containment %q: must be %q, %q or empty (auto)", cfg.Contain, ContainCgroup, ContainMark)
	}
	if d.bookings, err = openJournal(cfg.StateDir); err != nil {
		_ = st.Close()
		return nil, err
	}
	if err := d.bookings.write(Booking{Time: cfg.Now().UTC(), Op: "start"}); err != nil {
		cfg.Log.Warn("write the booking journal", "err", err)
	}
	if err := d.recover(); err != nil {
		_ = d.bookings.close()
		_ = st.Close()
		return nil, err
	}
	if err := d.loadQueue(); err != nil {
		_ = d.bookings.close()
		_ = st.Close()
		return nil, err
	}
	if cfg.MIG != nil {
		d.reconcileMIG(migPrev)
	}
	return d, nil
}

// StateDir is the daemon's absolute state folder.
func (d *Daemon) StateDir() string { return d.cfg.StateDir }

// JobDir is the folder of job id (spec, logs, exit status).
func (d *Daemon) JobDir(id string) string { return store.JobDir(d.cfg.StateDir, id) }

// Run schedules jobs until ctx ends. Jobs keep running after it returns;
// a later daemon on the same state folder re-adopts them.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	for _, j := range d.adopted {
		d.watchers.Add(1)
		go d.watchAdopted(ctx, j)
	}
	d.adopted = nil
	d.looping = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.looping = false
		d.mu.Unlock()
	}()
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	for {
		d.retryMIG()
		d.schedule()
		select {
		case <-ctx.Done():
			d.watchers.Wait()
			return nil
		case <-d.wake:
		case <-tick.C:
		}
	}
}

// Close releases the job database. Call it after Run returns; running jobs
// are left running.
func (d *Daemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.endLife()
	if err := d.bookings.close(); err != nil {
		d.cfg.Log.Warn("close the booking journal", "err", err)
	}
	// Kept while jobs run in it: the next daemon re-adopts them.
	if err := d.contain.Release(); err != nil {
		d.cfg.Log.Warn("remove the daemon's cgroup folder", "err", err)
	}
	d.dropRuntimeDir()
	return d.store.Close()
}

func (d *Daemon) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// notifyLocked wakes every Wait; d.mu must be held.
func (d *Daemon) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}
