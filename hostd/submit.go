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
// "dir", "intercept-lib", "gpu").
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
	if err := d.fitsEverLocked(podOf(job).GPU); err != nil {
		return api.Job{}, err
	}
	job.State, job.Submitted = api.Queued, d.cfg.Now().UTC()
	job.OwnerUID = r.OwnerUID // set by the API server from the connection
	job, err = d.store.Create(job)
	if err != nil {
		return api.Job{}, err
	}
	d.cfg.Log.Info("job queued", "job", job.ID, "queue", job.Queue, "priority", job.Priority, "command", job.Command[0])
	d.notifyLocked()
	d.poke()
	return job, nil
}

func (d *Daemon) validate(r api.SubmitRequest) (api.Job, error) {
	gpu, err := request.Parse(r.GPU, d.cfg.Catalog)
	if err != nil {
		var fe *request.FieldError
		if errors.As(err, &fe) {
			return api.Job{}, &InputError{Field: fe.Field, Msg: err.Error()}
		}
		return api.Job{}, &InputError{Field: "gpu", Msg: err.Error()}
	}
	if d.cfg.Sharing == arbiter.ModeMPS && gpu.MIGProfile == "" && gpu.Count > 1 {
		return api.Job{}, &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be 1 on this host, got %d: it shares GPUs with NVIDIA MPS (tessera up --sharing mps), and an MPS client runs on one GPU (its CUDA_MPS_PIPE_DIRECTORY names one GPU's control daemon); submit one job per GPU", gpu.Count)}
	}
	var engine *request.GPU
	if gpu.MIGProfile != "" {
		share, err := d.migShare(gpu)
		if err != nil {
			return api.Job{}, err
		}
		engine = &share
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

// fitsEverLocked rejects requests no amount of waiting can satisfy.
func (d *Daemon) fitsEverLocked(gpu request.GPU) error {
	total := 0
	for _, n := range d.empty.Nodes {
		total = max(total, len(n.GPUs))
	}
	if gpu.Count > total {
		return &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be in [1, %d] (the GPUs of this host), got %d", total, gpu.Count)}
	}
	pod := placement.Pod{Name: "probe", GPU: gpu}
	if _, err := d.probe.Place(d.empty, &pod); err != nil {
		return &InputError{Field: "gpu", Msg: fmt.Sprintf("no GPU of this host can ever take this request (%v)", err)}
	}
	return nil
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
