package hostd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Config configures a Daemon.
type Config struct {
	// StateDir holds the job database and one folder per job (required).
	StateDir string
	// Source names the inventory source ("sim:2xH200", "local").
	Source string
	// Simulated says the GPUs are simulated (shown in status).
	Simulated bool
	// Nodes are the discovered GPUs (in practice one node).
	Nodes []inventory.Node
	// Catalog resolves request models (required).
	Catalog *catalog.Catalog
	// Policy is the placement policy name (default placement.DefaultPolicy).
	Policy string
	// Supervisor is the command that supervises one job, the job folder
	// appended (required), e.g. [/usr/bin/tessera supervise].
	Supervisor []string
	// InterceptLib is the interception library preloaded into jobs ("" none).
	InterceptLib string
	// AgingStep is the wait that raises a waiting job's priority by one, so
	// a low priority cannot starve behind newer high ones (default
	// DefaultAgingStep; negative: no aging). Jobs start in one order across
	// queues: the cluster's fair-share rules between queues, priority with
	// aging then submission within one (package dispatch).
	AgingStep time.Duration
	// Queues are the configured queues (guarantees, weights, limits,
	// priorities, parents), validated by New. When empty, any valid queue
	// name is accepted and created on first use (weight 1, no guarantee);
	// otherwise a job must name a configured queue or "default".
	Queues []queueing.Queue
	// DisablePreemption turns off stopping running jobs for waiting ones.
	DisablePreemption bool
	// PreemptionMinRuntime protects jobs that have run less than this from
	// preemption (0: no protection).
	PreemptionMinRuntime time.Duration
	// Arbiter is the node arbiter seam (nil: none; compute is then not
	// gated and jobs run with TESSERA_COMPUTE_FAIL=open).
	Arbiter Arbiter
	// Sharing is how jobs share a GPU, the node arbiter's mode:
	// arbiter.ModeTokens (the default: launch tokens) or arbiter.ModeMPS
	// (NVIDIA MPS caps each job, which needs Arbiter, built in that mode).
	// In ModeMPS a job takes one GPU (an MPS client reaches one GPU's
	// control daemon): a request for more is refused at submission.
	Sharing arbiter.Mode
	// MIG creates and destroys the MIG instances of jobs on the GPUs whose
	// layout Tessera manages (migctl.Manager over NVML: tessera up
	// --mig-managed on a real host). Nil: instances are created only on
	// simulated hosts, where creation is simulated.
	MIG MIGInstances
	// StopGrace is how long a stopped job has between SIGTERM and SIGKILL
	// (default 10s).
	StopGrace time.Duration
	// PollInterval is how often adopted jobs (started by an earlier daemon)
	// are checked for exit, and how often aging is re-evaluated (default 250ms).
	PollInterval time.Duration
	// Contain says how a job's processes are kept together so that all of
	// them end before its share is freed (see package contain).
	Contain Containment
	// JobUser is whom a daemon running as root runs the jobs of root and
	// of API token holders as (tessera up --job-user); nil: as root, and
	// such a job can leave its cgroup. A job another user submits over the
	// socket always runs as that user. A daemon not running as root runs
	// every job as itself: JobUser must then be nil or itself.
	JobUser *supervisor.User
	// RuntimeDir is where a root daemon makes the accounting folders of
	// jobs it runs as other users (shm.go; default
	// /run/tessera/<digest of StateDir>). The daemon makes it and its
	// parent (0711, root's), and removes it on Close when empty.
	RuntimeDir string
	// Log receives the daemon's logs (default slog.Default()).
	Log *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultAgingStep is the wait that raises a waiting job's priority by one
// unless Config.AgingStep says otherwise.
const DefaultAgingStep = time.Minute

// Arbiter is the seam for the node arbiter, which gates compute. The
// daemon calls Admit before a job starts (and again for jobs it re-adopts
// after a restart), then ClientEnv for a job it starts, and Release after
// it ends. ArbiterSeat, the adapter over package arbiter, maps Admit to
// Register(Client{Key: job.ID, Dir: shmDir, GPUs: job.Shares}) and returns
// shmDir/grant, and ClientEnv to Arbiter.ClientEnv.
type Arbiter interface {
	// Admit returns the grant region file the job's interception library
	// reads (TESSERA_ARBITER_REGION), or "" to leave compute ungated.
	// shmDir is the job's TESSERA_SHM_DIR.
	Admit(job api.Job, shmDir string) (region string, err error)
	// ClientEnv returns the variables an admitted job must be started
	// with besides the daemon's own (in MPS mode CUDA_MPS_PIPE_DIRECTORY,
	// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT;
	// none with launch tokens).
	ClientEnv(ctx context.Context, jobID string) (map[string]string, error)
	// Release forgets the job.
	Release(jobID string)
}

func (c *Config) defaults() error {
	if c.StateDir == "" {
		return fmt.Errorf("state dir: must be set")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", c.StateDir, err)
	}
	c.StateDir = abs
	if c.Catalog == nil {
		return fmt.Errorf("catalog: must be set")
	}
	if len(c.Supervisor) == 0 {
		return fmt.Errorf("supervisor command: must be set")
	}
	if c.Policy == "" {
		c.Policy = placement.DefaultPolicy
	}
	if c.AgingStep == 0 {
		c.AgingStep = DefaultAgingStep
	}
	if _, err := queueing.NewTree(c.Queues); err != nil {
		return fmt.Errorf("queues: %w", err)
	}
	var gpus int64
	for _, n := range c.Nodes {
		gpus += int64(len(n.GPUs))
	}
	for i, q := range c.Queues {
		if q.Guaranteed.GPUMilli > gpus*request.Whole {
			return fmt.Errorf("queues[%d].guaranteed.gpu: must be at most this host's %d GPUs, got %s", i, gpus, quantity.FormatShare(q.Guaranteed.GPUMilli))
		}
	}
	switch c.Sharing {
	case arbiter.ModeTokens:
	case arbiter.ModeMPS:
		if c.Arbiter == nil {
			return fmt.Errorf("arbiter: must be set when sharing is %s (the node arbiter runs the MPS daemons and gives jobs their MPS settings)", c.Sharing)
		}
	default:
		return fmt.Errorf("sharing: must be %s or %s, got %s", arbiter.ModeTokens, arbiter.ModeMPS, c.Sharing)
	}
	if c.PreemptionMinRuntime < 0 {
		return fmt.Errorf("preemption min runtime: must be >= 0, got %s", c.PreemptionMinRuntime)
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	if euid := os.Geteuid(); c.JobUser != nil && euid != 0 && c.JobUser.UID != uint32(euid) {
		return fmt.Errorf("job user: must be this daemon's own user (uid %d) when it does not run as root, got %s: only root can start a job as another user", euid, c.JobUser)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.RuntimeDir == "" {
		c.RuntimeDir = defaultRuntimeDir(c.StateDir)
	} else if err := checkRuntimeDir(c); err != nil {
		return err
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Containment is how the daemon keeps each job's processes together.
type Containment string

const (
	// ContainAuto uses a cgroup v2 per job where a writable hierarchy
	// exists, else environment marks alone (the default).
	ContainAuto Containment = ""
	// ContainCgroup requires a cgroup v2 per job: the daemon refuses to
	// start without a writable hierarchy.
	ContainCgroup Containment = "cgroup"
	// ContainMark finds a job's processes by the mark in their environment
	// alone (a process that clears its environment escapes).
	ContainMark Containment = "mark"
)

// ErrNoCgroup is returned (wrapped) by New when ContainCgroup is asked for
// and no writable cgroup v2 hierarchy exists.
var ErrNoCgroup = errors.New("no writable cgroup v2 hierarchy for the jobs' cgroups")
