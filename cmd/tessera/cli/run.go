package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/internal/termsafe"
	"github.com/tessera-gpu/tessera/request"
)

type runOptions struct {
	host         hostFlags
	fraction     string
	limit        string
	memory       string
	memoryLimit  string
	model        string
	queue        string
	priority     int
	detach       bool
	interceptLib string
	restartable  bool
	// env are --env entries (NAME, or NAME=VALUE); envAll is --env-all.
	env    []string
	envAll bool
	// requestID is --request-id: "" makes a random one.
	requestID string
}

func newRunCommand(a *app) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run a command on a share of this host's GPUs (through the daemon's queue)",
		Long: `Submit a job to the host daemon ("tessera up"). The job waits in its queue
until it fits, then runs with CUDA_VISIBLE_DEVICES set to its GPUs (by UUID),
TESSERA_* variables describing its shares and limits, and the interception
library preloaded when available. Its output streams back here and tessera run
exits with the job's exit code; with --detach it prints the job ID and returns.
Without GPU flags the job takes one whole GPU.`,
		Example: `  tessera run -- nvidia-smi -L
  tessera run --gpu-fraction 0.25 --gpu-limit 0.8 --gpu-memory 20Gi -- python train.py
  tessera run --gpus 2 --model H200 --priority 10 --detach -- ./bench.sh
  tessera run --mig 1g.18gb -- python infer.py
  tessera run --queue research --restartable -- python train.py --resume`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("command: give the command to run after --, e.g. tessera run --gpu-fraction 0.5 -- python train.py (usage: %s)", cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return a.runJob(cmd.Context(), cmd.Flags(), o, args) },
	}
	cmd.Flags().SetInterspersed(false)
	o.host.register(cmd)
	f := cmd.Flags()
	// The daemon checks --gpus with the other GPU flags, against the
	// host's GPUs, so a bad value is refused quoting this host's range.
	f.Var(&rawValue{v: "1", typ: "int"}, "gpus", fmt.Sprintf("number of GPUs, in [1, %d] and at most this host's GPUs (1 on a host started with --sharing mps)", request.MaxCount))
	setRange(cmd, "gpus", fmt.Sprintf("in [1, %d], at most this host's GPUs", request.MaxCount))
	f.StringVar(&o.fraction, "gpu-fraction", "", "guaranteed share of each GPU, in (0, 1]: 0.25, 25% or 250m (default 1, a whole GPU)")
	f.StringVar(&o.limit, "gpu-limit", "", "burst limit of each GPU, in [--gpu-fraction, 1] (default = --gpu-fraction)")
	f.StringVar(&o.memory, "gpu-memory", "", "guaranteed memory per GPU, e.g. 20Gi (default: --gpu-fraction of the GPU's memory)")
	f.StringVar(&o.memoryLimit, "gpu-memory-limit", "", "memory cap per GPU, at least --gpu-memory (default = --gpu-memory)")
	f.StringVar(&o.model, "model", "", "allowed GPU models, e.g. H200 or A100-80GB|H100 (default: any)")
	f.String("mig", "", "a MIG instance of this profile per GPU instead of a share, e.g. 1g.18gb (on MIG-capable models; see docs/host.md)")
	f.StringVar(&o.queue, "queue", hostd.DefaultQueue, "queue name: a-z, 0-9, '.', '-', starting and ending with a letter or digit (with tessera up --config: a configured queue)")
	f.IntVar(&o.priority, "priority", 0, fmt.Sprintf("priority within the queue, in [%d, %d]; higher starts first", hostd.MinPriority, hostd.MaxPriority))
	setRange(cmd, "priority", fmt.Sprintf("in [%d, %d]", hostd.MinPriority, hostd.MaxPriority))
	f.BoolVarP(&o.detach, "detach", "d", false, "print the job ID and return instead of streaming its output")
	f.StringVar(&o.interceptLib, "intercept-lib", "", "interception library to preload instead of the daemon's")
	f.BoolVar(&o.restartable, "restartable", false, "if preempted, go back to the queue and start again from the beginning (default: end as preempted)")
	f.StringArrayVarP(&o.env, "env", "e", nil, "pass NAME from this environment, or set NAME=VALUE, in the job's environment (repeatable); by default the job gets only "+strings.Join(baseEnvNames, ", ")+" and LC_*")
	f.BoolVar(&o.envAll, "env-all", false, "pass this whole environment to the job (the daemon keeps it with the job; TESSERA_TOKEN is never passed)")
	f.StringVar(&o.requestID, "request-id", "", "submit at most once under this ID (8-64 of A-Z a-z 0-9 - _): a retry with the same ID returns the first job instead of queueing another (default: a new random ID)")
	return cmd
}

// rawValue is a flag value kept as given: it is checked later, with what
// only the daemon knows (this host's GPUs). typ is the type --help shows.
type rawValue struct{ v, typ string }

func (r *rawValue) String() string     { return r.v }
func (r *rawValue) Set(s string) error { r.v = s; return nil }
func (r *rawValue) Type() string       { return r.typ }

// runFields turns the GPU flags into request fields. The daemon checks
// them, against this host's GPUs (the shared request.Parse first), and
// its errors name the fields, which flagError restates under the flags.
func runFields(flags *pflag.FlagSet) map[string]string {
	fields := map[string]string{request.FieldCount: flags.Lookup("gpus").Value.String()}
	for flag, field := range map[string]string{
		"gpu-fraction": request.FieldCompute, "gpu-limit": request.FieldComputeLimit,
		"gpu-memory": request.FieldMemory, "gpu-memory-limit": request.FieldMemoryLimit, "model": request.FieldModel,
		"mig": request.FieldMIGProfile,
	} {
		if flags.Changed(flag) {
			fields[field] = flags.Lookup(flag).Value.String()
		}
	}
	return fields
}

// flagError restates a daemon input error under the flag name, as a
// usage error.
func flagError(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Field != "" {
		msg := strings.TrimPrefix(ae.Msg, ae.Field+": ")
		return usageError("%s: %s", hostd.FlagOf(ae.Field), termsafe.String(msg))
	}
	return asUsage(err)
}

// refuseNUL refuses a NUL byte in the command, the environment or the
// working folder before anything is sent (the daemon refuses it too): no
// program can be given one. Values are not quoted: they may be secrets.
func refuseNUL(command, env []string, dir string) error {
	for _, f := range []struct {
		name string
		vs   []string
	}{{"command", command}, {"env", env}, {"dir", []string{dir}}} {
		for i, v := range f.vs {
			if at := strings.IndexByte(v, 0); at >= 0 {
				name := fmt.Sprintf("%s[%d]", f.name, i)
				switch f.name {
				case "env": // named by its variable: the index means nothing here
					k, _, _ := strings.Cut(v, "=")
					name = "environment variable " + termsafe.String(k)
				case "dir":
					name = "working folder"
				}
				return usageError("%s: contains a NUL byte (at byte %d), which a program's arguments, environment and folder cannot hold", name, at)
			}
		}
	}
	return nil
}

// resolveCommand finds the program on PATH, so a missing command is an
// error here and never a queued job.
func resolveCommand(args []string) ([]string, error) {
	path, err := exec.LookPath(args[0])
	if err != nil {
		why := "is not an executable file"
		switch {
		case errors.Is(err, exec.ErrNotFound):
			why = "is not found on PATH"
		case errors.Is(err, fs.ErrNotExist):
			why = "does not exist"
		case errors.Is(err, fs.ErrPermission):
			why = "is not executable (permission denied)"
		}
		return nil, &exitError{code: 127, msg: fmt.Sprintf("command: %q %s", args[0], why)}
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	return append([]string{path}, args[1:]...), nil
}

func (a *app) runJob(ctx context.Context, flags *pflag.FlagSet, o runOptions, args []string) error {
	if _, _, err := o.host.resolve(); err != nil {
		return err
	}
	fields := runFields(flags)
	if o.priority < hostd.MinPriority || o.priority > hostd.MaxPriority {
		return usageError("--priority: must be in [%d, %d], got %d", hostd.MinPriority, hostd.MaxPriority, o.priority)
	}
	command, err := resolveCommand(args)
	if err != nil {
		return err
	}
	lib := ""
	if o.interceptLib != "" {
		if lib, err = findInterceptLib(o.interceptLib); err != nil {
			return asUsage(err)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working folder: %w", err)
	}
	c, err := a.hostClient(&o.host)
	if err != nil {
		return err
	}
	env, err := jobEnv(os.Environ(), o.env, o.envAll)
	if err != nil {
		return err
	}
	if err := refuseNUL(command, env, wd); err != nil {
		return err
	}
	rid := o.requestID
	if rid == "" {
		rid = newRequestID()
	}
	req := api.SubmitRequest{
		GPU: fields, Command: command, Env: env, Dir: wd,
		Queue: o.queue, Priority: o.priority, InterceptLib: lib, Restartable: o.restartable,
		RequestID: rid,
	}
	if t := c.Timeout(); t > 0 {
		// A submission the daemon reads only after this client gave up
		// queues nothing (a frozen daemon resumed later).
		notAfter := time.Now().Add(t)
		req.NotAfter = &notAfter
	}
	job, err := c.Submit(ctx, req)
	if err != nil {
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == 400 && ae.Field == "requestId":
			return usageError("--request-id: %s", termsafe.String(strings.TrimPrefix(ae.Msg, "requestId: ")))
		case errors.As(err, &ae) && ae.Status == 400:
			return flagError(err)
		case errors.Is(err, client.ErrTimeout):
			return fmt.Errorf("%w. The submission was sent under request ID %s: the daemon queues it only if it read it within that time; to be sure, run the same command with --request-id %s, which returns that job if it was queued and queues it once if not", err, rid, rid)
		}
		return err
	}
	if o.detach {
		fmt.Fprintln(a.stdout, termsafe.String(job.ID))
		return nil
	}
	return a.follow(ctx, c, job.ID)
}

// follow streams the job's output until it ends and returns its exit code.
// An interrupt stops the job (and still waits for its end). When the daemon
// restarts meanwhile, follow waits for the next one and resumes where the
// output stopped: the job itself keeps running.
func (a *app) follow(ctx context.Context, c *client.Client, id string) error {
	bg := context.WithoutCancel(ctx)
	var (
		wg sync.WaitGroup
		mu sync.Mutex // stdout and stderr may be one writer
	)
	stdout, stderr := &lockedWriter{mu: &mu, w: a.stdout}, &lockedWriter{mu: &mu, w: a.stderr}
	warn := &onceWriter{w: stderr}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "tessera: stopping %s\n", termsafe.String(id))
			if _, err := c.Stop(bg, id); err != nil {
				fmt.Fprintf(stderr, "tessera: stop %s: %s\n", termsafe.String(id), safeMessage(err))
			}
		case <-stopped:
		}
	}()
	logErrs := make([]error, 2)
	for i, s := range []struct {
		name string
		w    *lockedWriter
	}{{"stdout", stdout}, {"stderr", stderr}} {
		wg.Go(func() {
			var off int64
			logErrs[i] = retry(ctx, warn, func() error {
				n, err := c.Logs(bg, id, s.name, true, off, s.w)
				off += n
				return err
			})
		})
	}
	var job api.Job
	err := retry(ctx, warn, func() error {
		var err error
		job, err = c.Wait(bg, id)
		return err
	})
	wg.Wait()
	if err != nil {
		return err
	}
	if err := errors.Join(logErrs...); err != nil {
		return err
	}
	return jobExit(job)
}

// retryPause is how long follow waits between attempts to reach a
// restarting daemon.
const retryPause = 200 * time.Millisecond

// retry calls f until it succeeds or fails for a reason other than an
// unreachable daemon; after an interrupt it gives up on an unreachable one.
// It says on warn that it is waiting.
func retry(ctx context.Context, warn io.Writer, f func() error) error {
	for {
		err := f()
		if err == nil || !errors.Is(err, client.ErrUnreachable) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w; the job may still be running: see tessera ps", err)
		}
		fmt.Fprintln(warn, "tessera: lost the daemon; waiting for it to come back (the job keeps running)")
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
}

// jobExit turns a finished job into the command's exit status.
func jobExit(j api.Job) error {
	if j.State == api.Preempted {
		code := 1
		if j.ExitCode != nil && *j.ExitCode != 0 {
			code = *j.ExitCode
		}
		return &exitError{code: code, msg: fmt.Sprintf("job %s %s (submit it with --restartable to have it re-queued instead)", termsafe.String(j.ID), termsafe.String(j.Reason))}
	}
	if j.ExitCode != nil {
		if *j.ExitCode == 0 {
			return nil
		}
		return &exitError{code: *j.ExitCode}
	}
	return &exitError{code: 1, msg: fmt.Sprintf("job %s %s: %s", termsafe.String(j.ID), termsafe.String(string(j.State)), termsafe.String(j.Reason))}
}

// lockedWriter serialises writes from the two log streams.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// onceWriter passes on its first write only (one warning for all streams).
type onceWriter struct {
	once sync.Once
	w    io.Writer
}

func (o *onceWriter) Write(p []byte) (int, error) {
	o.once.Do(func() { _, _ = o.w.Write(p) })
	return len(p), nil
}

// baseEnvNames are the variables of the caller's environment a job gets
// without --env or --env-all (with LC_*): where programs are found, whose
// the session is, its language and terminal. They hold no secrets, as
// sudo's env_reset keeps the like of them.
var baseEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}

// jobEnv is the environment tessera run sends with a job: the base
// variables of environ, or all of it with all, then each --env entry
// (NAME takes environ's value, NAME=VALUE sets it). TESSERA_TOKEN is
// never sent.
func jobEnv(environ, entries []string, all bool) ([]string, error) {
	keep := func(name string) bool {
		return all || slices.Contains(baseEnvNames, name) || strings.HasPrefix(name, "LC_")
	}
	byName := map[string]string{}
	var order []string
	set := func(name, kv string) {
		if _, ok := byName[name]; !ok {
			order = append(order, name)
		}
		byName[name] = kv
	}
	lookup := map[string]string{}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		lookup[name] = kv
		if keep(name) && name != api.TokenEnv {
			set(name, kv)
		}
	}
	for _, e := range entries {
		name, _, hasValue := strings.Cut(e, "=")
		switch {
		case name == "" || strings.ContainsAny(name, " \t\n\x00"):
			return nil, usageError("--env: must be NAME or NAME=VALUE with a NAME of no spaces, got %q", e)
		case name == api.TokenEnv:
			return nil, usageError("--env: %s is never passed to a job (it runs commands as the daemon's user)", api.TokenEnv)
		case hasValue:
			set(name, e)
		default:
			kv, ok := lookup[name]
			if !ok {
				return nil, usageError("--env: %s is not set in this environment (give --env %s=VALUE to set it)", name, name)
			}
			set(name, kv)
		}
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, byName[name])
	}
	return out, nil
}

// newRequestID makes a random submission request ID.
func newRequestID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(raw[:])
}
