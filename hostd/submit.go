package hostd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Limits of a submission.
const (
	MinPriority  = -1000
	MaxPriority  = 1000
	DefaultQueue = "default"
)

// InputError is a rejected submission; Field names the request field
// (request.Field*) or submission field ("command", "queue", "priority",
// "dir", "intercept-lib", "gpu"). Msg says what the field must be and
// what it got, in this host's words (FlagOf names the flags it mentions),
// without the field's name.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Msg }

// Submit validates r and queues it. Invalid input queues nothing and
// returns an *InputError.
func (d *Daemon) Submit(r api.SubmitRequest) (api.Job, error) {
	job, err := d.validate(r)
	if err != nil {
		return api.Job{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return api.Job{}, errors.New("daemon is shutting down")
	}
	if err := d.fitsEverLocked(job, r.GPU); err != nil {
		return api.Job{}, err
	}
	job.State, job.Submitted = api.Queued, d.cfg.Now().UTC()
	job.OwnerUID = r.OwnerUID // set by the API server from the connection
	job, err = d.store.Create(job)
	if err != nil {
		return api.Job{}, err
	}
	d.arrived(job)
	d.cfg.Log.Info("job queued", "job", job.ID, "queue", job.Queue, "priority", job.Priority, "command", job.Command[0])
	d.notifyLocked()
	d.poke()
	return job, nil
}

func (d *Daemon) validate(r api.SubmitRequest) (api.Job, error) {
	gpu, err := d.parseGPU(r.GPU)
	if err != nil {
		return api.Job{}, err
	}
	// The engine's sharing rule, for this host: every job shares the
	// host's IPC namespace; a job that cannot run here under the host's
	// sharing is refused at submission, as it would wait forever.
	host := placement.NodeSharing{Fractions: true, MPS: d.cfg.Sharing == arbiter.ModeMPS}
	if placement.SharingFit([]request.GPU{gpu}, placement.SharingNeeds{SharedIPC: true}, host) == placement.MPSOneGPU {
		return api.Job{}, &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be 1 on this host, got %d: it shares GPUs with NVIDIA MPS (tessera up --sharing mps), and an MPS client runs on one GPU (its CUDA_MPS_PIPE_DIRECTORY names one GPU's control daemon); submit one job per GPU", gpu.Count)}
	}
	var engine *request.GPU
	if gpu.MIGProfile != "" {
		if err := d.checkMIG(gpu); err != nil {
			return api.Job{}, err
		}
		engine = d.migEquivalent(gpu)
	}
	if len(r.Command) == 0 || r.Command[0] == "" {
		return api.Job{}, &InputError{Field: "command", Msg: "must name a program to run"}
	}
	if !filepath.IsAbs(r.Command[0]) {
		return api.Job{}, &InputError{Field: "command", Msg: fmt.Sprintf("must be an absolute path (the client resolves it on PATH), got %q", r.Command[0])}
	}
	if fi, err := os.Stat(r.Command[0]); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return api.Job{}, &InputError{Field: "command", Msg: fmt.Sprintf("%s is not an executable file", r.Command[0])}
	}
	q := r.Queue
	if q == "" {
		q = DefaultQueue
	}
	if !queueing.ValidName(q) {
		return api.Job{}, &InputError{Field: "queue", Msg: fmt.Sprintf("must be a lowercase DNS label (1-63 characters of a-z, 0-9, '.', '-', starting and ending with a letter or digit), got %q", r.Queue)}
	}
	if len(d.cfg.Queues) > 0 && q != DefaultQueue && !d.configured(q) {
		return api.Job{}, &InputError{Field: "queue", Msg: fmt.Sprintf("queue %q is not configured; this daemon's queues are %s (queues are declared in the file given to tessera up --config)", q, strings.Join(d.queueNames(), ", "))}
	}
	if r.Priority < MinPriority || r.Priority > MaxPriority {
		return api.Job{}, &InputError{Field: "priority", Msg: fmt.Sprintf("must be in [%d, %d], got %d", MinPriority, MaxPriority, r.Priority)}
	}
	if r.Dir != "" && !filepath.IsAbs(r.Dir) {
		return api.Job{}, &InputError{Field: "dir", Msg: fmt.Sprintf("must be an absolute path, got %q", r.Dir)}
	}
	lib := d.cfg.InterceptLib
	if r.InterceptLib != "" {
		if fi, err := os.Stat(r.InterceptLib); err != nil || fi.IsDir() || !filepath.IsAbs(r.InterceptLib) {
			return api.Job{}, &InputError{Field: "intercept-lib", Msg: fmt.Sprintf("must be an existing file given by absolute path, got %q", r.InterceptLib)}
		}
		lib = r.InterceptLib
	}
	return api.Job{GPU: gpu, Command: r.Command, Env: r.Env, Dir: r.Dir, Queue: q, Priority: r.Priority, InterceptLib: lib, Restartable: r.Restartable, EngineGPU: engine}, nil
}

// fitsEverLocked rejects requests no amount of waiting can satisfy: the
// engine is asked to place the job on the idle host, and its rejection
// is said in host words (neverFits); then a memory cap is checked against
// the GPUs the job may use. fields are the request as submitted (for
// quoting values).
func (d *Daemon) fitsEverLocked(job api.Job, fields map[string]string) error {
	total := 0
	for _, n := range d.empty.Nodes {
		total = max(total, len(n.GPUs))
	}
	if job.GPU.Count > total {
		return d.countError(fmt.Sprint(job.GPU.Count), true)
	}
	pod := placement.Pod{Name: "probe", GPU: podOf(job).GPU}
	if _, err := d.probe.Place(d.empty, &pod); err != nil {
		var nf *placement.NoFitError
		if errors.As(err, &nf) {
			return d.neverFits(job, fields, nf.First)
		}
		return fmt.Errorf("probe the idle host: %w", err)
	}
	return d.checkMemoryLimit(job, fields)
}

func (d *Daemon) configured(name string) bool {
	for _, q := range d.cfg.Queues {
		if q.Name == name {
			return true
		}
	}
	return false
}

// queueNames lists the configured queues and the default one, sorted.
func (d *Daemon) queueNames() []string {
	names := []string{DefaultQueue}
	for _, q := range d.cfg.Queues {
		if q.Name != DefaultQueue {
			names = append(names, q.Name)
		}
	}
	slices.Sort(names)
	return names
}
