package hostd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
	DefaultQueue = queueing.DefaultQueue
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
// returns an *InputError. A submission whose RequestID its owner used
// before returns the first one's job and queues nothing (SubmitOnce).
func (d *Daemon) Submit(r api.SubmitRequest) (api.Job, error) {
	j, _, err := d.SubmitOnce(r)
	return j, err
}

// SubmitOnce is Submit that also says whether it queued a new job (false:
// r.RequestID named a job its owner submitted before, which it returns).
func (d *Daemon) SubmitOnce(r api.SubmitRequest) (api.Job, bool, error) {
	if err := checkRequestID(r.RequestID); err != nil {
		return api.Job{}, false, err
	}
	if r.NotAfter != nil && d.cfg.Now().After(*r.NotAfter) {
		return api.Job{}, false, &InputError{Field: "notAfter", Msg: fmt.Sprintf(
			"the client stopped waiting at %s, before the daemon read the submission: nothing was queued (submit again; with the same request ID a retry never queues twice)",
			r.NotAfter.UTC().Format(time.RFC3339Nano))}
	}
	if j, ok, err := d.submitted(r); err != nil || ok {
		return j, false, err
	}
	job, err := d.validate(r)
	if err != nil {
		return api.Job{}, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return api.Job{}, false, errors.New("daemon is shutting down")
	}
	// A retry may have raced this one through validation: the lookup
	// under the lock decides.
	if j, ok, err := d.store.ByRequest(r.OwnerUID, r.RequestID); err != nil || ok {
		return j, false, err
	}
	if err := d.fitsEverLocked(job, r.GPU); err != nil {
		return api.Job{}, false, err
	}
	job.State, job.Submitted = api.Queued, d.cfg.Now().UTC()
	job.OwnerUID = r.OwnerUID // set by the API server from the connection
	job.RequestID = r.RequestID
	job, err = d.store.Create(job)
	if err != nil {
		return api.Job{}, false, err
	}
	d.core.Add(itemOf(job)) // its arrival teaches the policy at the next pass
	d.cfg.Log.Info("job queued", "job", job.ID, "queue", job.Queue, "priority", job.Priority, "command", job.Command[0])
	d.notifyLocked()
	d.poke()
	return job, true, nil
}

// submitted returns the job r's owner submitted before with r's request
// ID, if any.
func (d *Daemon) submitted(r api.SubmitRequest) (api.Job, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.store.ByRequest(r.OwnerUID, r.RequestID)
}

// Request IDs (api.SubmitRequest.RequestID).
const (
	minRequestID = 8
	maxRequestID = 64
)

func checkRequestID(id string) error {
	if id == "" {
		return nil
	}
	ok := len(id) >= minRequestID && len(id) <= maxRequestID
	for _, c := range id {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}
	if !ok {
		return &InputError{Field: "requestId", Msg: fmt.Sprintf("must be %d to %d characters of A-Z, a-z, 0-9, '-' and '_', got %q", minRequestID, maxRequestID, id)}
	}
	return nil
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
	if err := checkNUL(r); err != nil {
		return api.Job{}, err
	}
	if !filepath.IsAbs(r.Command[0]) {
		return api.Job{}, &InputError{Field: "command", Msg: fmt.Sprintf("must be an absolute path (the client resolves it on PATH), got %q", r.Command[0])}
	}
	if fi, err := os.Stat(r.Command[0]); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return api.Job{}, &InputError{Field: "command", Msg: fmt.Sprintf("%s is not an executable file", r.Command[0])}
	}
	q := queueing.QueueOr(r.Queue)
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
	if err := checkDir(r.Dir); err != nil {
		return api.Job{}, err
	}
	if err := d.checkSimLoad(r.Env); err != nil {
		return api.Job{}, err
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

// checkNUL refuses a NUL byte in the command's arguments, the environment
// or the working folder: the kernel cannot pass one (exec and chdir take
// C strings), so such a job could only fail when it starts.
func checkNUL(r api.SubmitRequest) error {
	for _, f := range []struct {
		name, what string
		vs         []string
	}{{"command", "a program's arguments", r.Command}, {"env", "an environment entry", r.Env}} {
		for i, v := range f.vs {
			if at := strings.IndexByte(v, 0); at >= 0 { // the value is not quoted: it may be a secret
				return &InputError{Field: fmt.Sprintf("%s[%d]", f.name, i), Msg: fmt.Sprintf("contains a NUL byte (at byte %d), which %s cannot hold", at, f.what)}
			}
		}
	}
	if at := strings.IndexByte(r.Dir, 0); at >= 0 {
		return &InputError{Field: "dir", Msg: fmt.Sprintf("contains a NUL byte (at byte %d), which a folder name cannot hold", at)}
	}
	return nil
}

// checkDir refuses a working folder that is missing or not a folder now,
// rather than queueing a job that could only fail to start ("" is the
// daemon's own folder). The folder may still vanish before the job
// starts; the supervisor then says so in the job's reason.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &InputError{Field: "dir", Msg: fmt.Sprintf("the job's working folder %s does not exist (tessera run gives the folder it runs in)", dir)}
	case err != nil:
		return &InputError{Field: "dir", Msg: fmt.Sprintf("the job's working folder %s cannot be used (%v)", dir, err)}
	case !fi.IsDir():
		return &InputError{Field: "dir", Msg: fmt.Sprintf("the job's working folder %s is not a folder", dir)}
	}
	return nil
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
