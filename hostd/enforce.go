package hostd

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/nvmlmeter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// ArbiterSeat adapts the node arbiter to the daemon's Arbiter seam: a job
// is registered under its ID with its run folder and shares (in device
// index order, the job's CUDA ordinals), its grant region is returned for
// TESSERA_ARBITER_REGION, and its client variables (MPS mode) come from
// Arbiter.ClientEnv.
type ArbiterSeat struct {
	Enforcer arbiter.Enforcer
	Log      *slog.Logger
}

// Admit implements Arbiter.
func (s ArbiterSeat) Admit(job api.Job, shmDir string) (string, error) {
	gpus := append([]binding.Share(nil), job.Shares...)
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	if err := s.Enforcer.Register(context.Background(), job.ID, shmDir, gpus); err != nil {
		return "", err
	}
	return filepath.Join(shmDir, arbiter.RegionFile), nil
}

// ClientEnv implements Arbiter: in MPS mode, the job's MPS pipe folder,
// active thread percentage and pinned memory limit; none with tokens.
func (s ArbiterSeat) ClientEnv(ctx context.Context, jobID string) (map[string]string, error) {
	return s.Enforcer.Arbiter.ClientEnv(ctx, jobID)
}

// Release implements Arbiter.
func (s ArbiterSeat) Release(jobID string) {
	if err := s.Enforcer.Unregister(context.Background(), jobID); err != nil && s.Log != nil {
		s.Log.Warn("releasing a job's GPU shares", "job", jobID, "err", err)
	}
}

// jobRootsTTL is how long JobTree reuses the running jobs it read: the
// meter asks on every arbiter period, for every GPU process.
const jobRootsTTL = time.Second

// jobsForMeter lists the jobs without the daemon's lock, for the node
// arbiter's meters: the arbiter reads its meter under its own lock, and
// the daemon calls the arbiter under its lock (admitting or releasing a
// job), so a meter that took the daemon's lock could deadlock the two.
// The store is safe for concurrent reads (and never replaced); a meter
// may see the jobs as they were a moment ago.
func (d *Daemon) jobsForMeter() ([]api.Job, error) { return d.store.List() }

// JobTree tells the NVML meter which processes are whose: each running
// job is the process tree under the supervisor the daemon started for it.
// Set the daemon once it exists; until then no process resolves.
type JobTree struct {
	d atomic.Pointer[Daemon]
	// Now is the clock for the cache (time.Now when nil).
	Now func() time.Time

	mu     sync.Mutex
	roots  map[int]string
	readAt time.Time
}

// Set makes t read d's jobs.
func (t *JobTree) Set(d *Daemon) { t.d.Store(d) }

// Roots returns every running job's supervisor PID, mapped to the job ID,
// as nvmlmeter.ProcTree wants it; it reads the jobs at most once a second.
func (t *JobTree) Roots(ctx context.Context) (map[int]string, error) {
	d := t.d.Load()
	if d == nil {
		return nil, nil
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.roots != nil && now().Sub(t.readAt) < jobRootsTTL {
		return t.roots, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	jobs, err := d.jobsForMeter()
	if err != nil {
		return nil, err
	}
	roots := map[int]string{}
	for _, j := range jobs {
		if j.State == api.Running && j.SupervisorPID > 0 {
			roots[j.SupervisorPID] = j.ID
		}
	}
	t.roots, t.readAt = roots, now()
	return roots, nil
}

// NVMLMeter opens the node arbiter's utilisation meter on NVML for the
// host daemon's jobs: a GPU process belongs to the job whose supervisor it
// descends from or, failing that (a process that left the tree), to the
// job named by its TESSERA_CONTAINER_ID. Close it when done.
func NVMLMeter(jobs *JobTree, log *slog.Logger) (*nvmlmeter.Meter, error) {
	return nvmlmeter.Open(nvml.New(), nvmlmeter.Options{Logger: log, Resolver: nvmlmeter.First{
		nvmlmeter.ProcTree{Roots: jobs.Roots},
		nvmlmeter.Environ{},
	}})
}
