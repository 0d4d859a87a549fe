package mps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults for Config.
const (
	DefaultBinary         = "nvidia-cuda-mps-control"
	DefaultCheckEvery     = 5 * time.Second
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultCommandTimeout = 10 * time.Second
	// maxPipeDir keeps the daemon's socket paths (the pipe folder plus
	// the names MPS adds) under the 107-byte limit of Unix socket paths.
	maxPipeDir = 100
	// healthCommand is sent to tell whether a daemon answers.
	healthCommand = "get_default_active_thread_percentage"
)

// Config describes the daemons to run; zero fields take defaults.
type Config struct {
	// Binary is the control program, DefaultBinary (looked up on PATH)
	// when empty.
	Binary string
	// Root is an absolute folder; GPU u's daemon uses Root/u/pipe and
	// Root/u/log. Keep it short: Root/u/pipe must be at most 100 bytes.
	Root string
	// GPUs are the UUIDs to run a daemon for, distinct, of
	// [A-Za-z0-9-].
	GPUs []string
	// CheckEvery is how often each daemon is asked whether it is alive.
	CheckEvery time.Duration
	// MinBackoff and MaxBackoff bound the wait before starting a daemon
	// again: it doubles after every failed start or death and resets once
	// a periodic check finds the daemon alive. MinBackoff ≤ MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// CommandTimeout bounds one run of the control program.
	CommandTimeout time.Duration
	// Env is the environment the control program runs with, before the
	// per-GPU variables; os.Environ() when nil.
	Env []string
	// After waits; time.After when nil. Tests inject a fake.
	After  func(time.Duration) <-chan time.Time
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Binary == "" {
		c.Binary = DefaultBinary
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = DefaultCheckEvery
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks a config after defaults; errors name the field.
func (c Config) Validate() error {
	switch {
	case !filepath.IsAbs(c.Root):
		return fmt.Errorf("mps: root: must be an absolute path, got %q", c.Root)
	case len(c.GPUs) == 0:
		return errors.New("mps: gpus: must list at least one GPU UUID")
	case c.CheckEvery <= 0 || c.MinBackoff <= 0 || c.CommandTimeout <= 0:
		return fmt.Errorf("mps: checkEvery, minBackoff and commandTimeout: must be positive, got %v, %v, %v",
			c.CheckEvery, c.MinBackoff, c.CommandTimeout)
	case c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("mps: maxBackoff: must be at least minBackoff (%v), got %v", c.MinBackoff, c.MaxBackoff)
	}
	seen := map[string]bool{}
	for i, u := range c.GPUs {
		if !validUUID(u) {
			return fmt.Errorf("mps: gpus[%d]: must be 1-64 characters of [A-Za-z0-9-], got %q", i, u)
		}
		if seen[u] {
			return fmt.Errorf("mps: gpus[%d]: %s listed twice", i, u)
		}
		seen[u] = true
		if p := pipeDir(c.Root, u); len(p) > maxPipeDir {
			return fmt.Errorf("mps: root: pipe folder %s is %d bytes, must be at most %d (Unix socket paths are short); use a shorter root",
				p, len(p), maxPipeDir)
		}
	}
	return nil
}

func validUUID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func pipeDir(root, uuid string) string { return filepath.Join(root, uuid, "pipe") }
func logDir(root, uuid string) string  { return filepath.Join(root, uuid, "log") }

// Supervisor runs one MPS control daemon per configured GPU.
type Supervisor struct {
	cfg  Config
	gpus map[string]bool
}

// New validates cfg (after defaults) and returns a Supervisor; nothing
// starts before Run.
func New(cfg Config) (*Supervisor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Supervisor{cfg: cfg, gpus: map[string]bool{}}
	for _, u := range cfg.GPUs {
		s.gpus[u] = true
	}
	return s, nil
}

// Has reports whether the supervisor runs a daemon for GPU uuid.
func (s *Supervisor) Has(uuid string) bool { return s.gpus[uuid] }

// PipeDir is GPU uuid's CUDA_MPS_PIPE_DIRECTORY on the host.
func (s *Supervisor) PipeDir(uuid string) string { return pipeDir(s.cfg.Root, uuid) }

// LogDir is GPU uuid's CUDA_MPS_LOG_DIRECTORY on the host.
func (s *Supervisor) LogDir(uuid string) string { return logDir(s.cfg.Root, uuid) }

// env is the control program's environment for GPU uuid; later entries win
// in os/exec, so the GPU's values replace any inherited ones.
func (s *Supervisor) env(uuid string) []string {
	return append(append([]string(nil), s.cfg.Env...),
		"CUDA_VISIBLE_DEVICES="+uuid,
		EnvPipeDir+"="+s.PipeDir(uuid),
		EnvLogDir+"="+s.LogDir(uuid),
	)
}

// Control sends commands, one a line, to GPU uuid's daemon through its
// control pipe (echo CMD | nvidia-cuda-mps-control) and returns what it
// printed. It fails when the daemon is not running.
func (s *Supervisor) Control(ctx context.Context, uuid string, commands ...string) (string, error) {
	if !s.gpus[uuid] {
		return "", fmt.Errorf("mps control: GPU %s: no daemon is configured for it", uuid)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cfg.Binary)
	cmd.Env = s.env(uuid)
	cmd.Stdin = strings.NewReader(strings.Join(commands, "\n") + "\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("mps control: GPU %s: %s: %w%s", uuid, strings.Join(commands, "; "), err,
			detail(errOut.String()+out.String()))
	}
	return out.String(), nil
}

// detail formats a program's output for an error message.
func detail(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return " (" + s + ")"
}

// Run starts (or adopts) every GPU's daemon and keeps it running until ctx
// ends; it then sends "quit" to each and returns once all have been told.
func (s *Supervisor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, u := range s.cfg.GPUs {
		wg.Go(func() { s.supervise(ctx, u) })
	}
	wg.Wait()
	return nil
}

// supervise keeps one GPU's daemon alive until ctx ends, then stops it.
func (s *Supervisor) supervise(ctx context.Context, uuid string) {
	log := s.cfg.Logger.With("gpu", uuid, "pipe", s.PipeDir(uuid))
	backoff := s.cfg.MinBackoff
	up := false // whether the daemon was last seen answering
	defer func() {
		if up {
			s.quit(ctx, uuid, log)
		}
	}()
	for {
		if err := s.ensure(ctx, uuid, log); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.WarnContext(ctx, "mps: control daemon did not start; retrying", "in", backoff, "err", err)
			if !s.wait(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, s.cfg.MaxBackoff)
			continue
		}
		up = true
		for {
			if !s.wait(ctx, s.cfg.CheckEvery) {
				return
			}
			if err := s.healthy(ctx, uuid); err != nil {
				if ctx.Err() != nil {
					return
				}
				log.WarnContext(ctx, "mps: control daemon stopped answering; restarting", "in", backoff, "err", err)
				up = false
				break
			}
			backoff = s.cfg.MinBackoff
		}
		if !s.wait(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

// ensure makes sure GPU uuid's daemon runs: it adopts one that answers, or
// starts one (nvidia-cuda-mps-control -d) and checks that it answers.
func (s *Supervisor) ensure(ctx context.Context, uuid string, log *slog.Logger) error {
	for _, dir := range []string{s.PipeDir(uuid), s.LogDir(uuid)} {
		// Clients (containers, other users) need to reach the pipes.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("mps: GPU %s: %w", uuid, err)
		}
	}
	if err := s.healthy(ctx, uuid); err == nil {
		log.InfoContext(ctx, "mps: adopted a running control daemon")
		return nil
	}
	if err := s.start(ctx, uuid); err != nil {
		return err
	}
	if err := s.healthy(ctx, uuid); err != nil {
		return fmt.Errorf("mps: GPU %s: started, but the daemon does not answer: %w", uuid, err)
	}
	log.InfoContext(ctx, "mps: control daemon started", "log", s.LogDir(uuid))
	return nil
}

// healthy asks GPU uuid's daemon for its default active thread percentage:
// it is alive when it answers with a number.
func (s *Supervisor) healthy(ctx context.Context, uuid string) error {
	out, err := s.Control(ctx, uuid, healthCommand)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(out), 64); err != nil {
		return fmt.Errorf("mps control: GPU %s: %s: answered %q, not a percentage", uuid, healthCommand, strings.TrimSpace(out))
	}
	return nil
}

// start runs nvidia-cuda-mps-control -d, which forks the daemon and exits.
// Its output goes to a file in the log folder rather than a pipe: the
// daemon inherits the descriptors and would hold a pipe open.
func (s *Supervisor) start(ctx context.Context, uuid string) error {
	outPath := filepath.Join(s.LogDir(uuid), "tessera-start.out")
	out, err := os.Create(outPath)
	if err != nil {
		return fmt.Errorf("mps: GPU %s: %w", uuid, err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cfg.Binary, "-d")
	cmd.Env = s.env(uuid)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(outPath)
		return fmt.Errorf("mps: GPU %s: %s -d: %w%s", uuid, s.cfg.Binary, err, detail(string(msg)))
	}
	return nil
}

// quit tells GPU uuid's daemon to shut down (it stops taking clients and
// exits once its servers' clients are done). ctx has ended, so the command
// runs on a fresh deadline.
func (s *Supervisor) quit(ctx context.Context, uuid string, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	if _, err := s.Control(ctx, uuid, "quit"); err != nil {
		log.WarnContext(ctx, "mps: could not stop the control daemon", "err", err)
		return
	}
	log.InfoContext(ctx, "mps: control daemon told to quit")
}

// wait returns after d, or false at once when ctx ends.
func (s *Supervisor) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.cfg.After(d):
		return true
	}
}
