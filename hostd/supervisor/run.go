package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/hostd/contain"
)

// Run supervises the job in jobDir and returns the supervisor's own exit
// code (0 once the job's exit is recorded, whatever it was).
func Run(jobDir string) int {
	if err := run(jobDir); err != nil {
		fmt.Fprintln(os.Stderr, "tessera supervise:", err)
		return 1
	}
	return 0
}

func run(jobDir string) error {
	if err := CheckJobDir(jobDir); err != nil {
		return err
	}
	var spec Spec
	if err := readJSON(filepath.Join(jobDir, SpecFile), &spec); err != nil {
		return fmt.Errorf("read job spec: %w", err)
	}
	if len(spec.Command) == 0 {
		return fmt.Errorf("job spec: command is empty")
	}
	if spec.Claim != "" {
		cancelled, err := claim(spec.Claim)
		if err != nil {
			return err
		}
		if cancelled {
			// A restarted daemon found this run unclaimed and queued the
			// job again: it must not run twice.
			fmt.Fprintln(os.Stderr, "tessera supervise: this run was cancelled by a restarted daemon (the job is queued again); not starting it")
			return nil
		}
	}
	stdout, err := openLog(jobDir, StdoutFile)
	if err != nil {
		return fmt.Errorf("open stdout log: %w", err)
	}
	defer stdout.Close()
	stderr, err := openLog(jobDir, StderrFile)
	if err != nil {
		return fmt.Errorf("open stderr log: %w", err)
	}
	defer stderr.Close()
	// Room for the exit status, set aside before the job can fill the disk.
	reserveExit(jobDir)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	cmd, err := startJob(spec, stdout, stderr)
	if err != nil {
		if why := whyNotStarted(spec.Dir, spec.User); why != "" {
			// The kernel's words ("fork/exec /bin/true: no such file or
			// directory") name the program, not the folder at fault.
			err = errors.New(why)
		}
		fmt.Fprintf(stderr, "tessera: cannot start %s: %v\n", spec.Command[0], err)
		return writeExit(jobDir, Exit{Code: 127, Reason: "cannot start: " + err.Error(), Finished: time.Now().UTC()})
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var (
		werr error
		kill <-chan time.Time
	)
wait:
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				continue // the supervisor outlives its terminal and the daemon
			}
			_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
			_ = spec.Contain.Signal(s.(syscall.Signal))
			if kill == nil && spec.StopGrace > 0 {
				kill = time.After(spec.StopGrace)
			}
		case <-kill:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = spec.Contain.Signal(syscall.SIGKILL)
		case werr = <-done:
			break wait
		}
	}
	e := exitOf(werr)
	// The job is its whole process tree: what it left running (daemons,
	// setsid'd children) ends with it, before its exit is recorded and its
	// share can be given to another job.
	if err := endRest(spec.Contain); err != nil {
		fmt.Fprintln(os.Stderr, "tessera supervise:", err)
		e.Reason += "; " + err.Error()
	}
	return writeExit(jobDir, e)
}

// claim claims the run for this supervisor; cancelled is true when a
// recovering daemon claimed it first.
func claim(path string) (cancelled bool, err error) {
	pid := os.Getpid()
	start, _, _, err := ProcStart(pid)
	if err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	err = Claim(path, pid, start)
	if !errors.Is(err, ErrClaimed) {
		return false, err
	}
	c, ok, rerr := ReadClaim(path)
	if rerr != nil || !ok {
		return false, fmt.Errorf("claim run: %w (and reading it: %v)", err, rerr)
	}
	if c.Cancelled {
		return true, nil
	}
	return false, fmt.Errorf("claim run: already claimed by supervisor %d", c.PID)
}

// restGrace bounds how long the supervisor waits for the processes a job
// left behind to die after SIGKILL (only a process stuck in the kernel
// takes longer; the daemon keeps the share booked until it is gone).
const restGrace = 10 * time.Second

func endRest(c contain.Job) error {
	ctx, cancel := context.WithTimeout(context.Background(), restGrace)
	defer cancel()
	if err := c.Kill(ctx); err != nil {
		return fmt.Errorf("end the processes the job left: %w", err)
	}
	return c.Remove()
}

// startJob starts the job in its own process group, as spec.User where
// set, with its mark in the environment and, where it has one, inside its
// cgroup from the first instruction (so no child can be forked outside
// it). The cgroup is the supervisor's: the job's user cannot write to it
// or to any cgroup above it, so a job run as another user cannot move
// itself out.
func startJob(spec Spec, stdout, stderr *os.File) (*exec.Cmd, error) {
	env := append(slices.Clone(spec.Env), spec.Contain.Env())
	if spec.User != nil {
		env = userEnv(env, *spec.User)
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, spec.Dir, stdout, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if spec.User != nil {
			cmd.SysProcAttr.Credential = spec.User.credential()
		}
		return cmd
	}
	cg, err := spec.Contain.Prepare()
	if err != nil {
		return nil, err
	}
	if cg == nil {
		cmd := newCmd()
		return cmd, cmd.Start()
	}
	defer cg.Close()
	cmd := newCmd()
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	if err := cmd.Start(); err == nil {
		return cmd, nil
	}
	// Kernels before 5.7 cannot create a process in a cgroup: start it,
	// then move it there (a child forked in between is still found by its
	// mark).
	cmd = newCmd()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := spec.Contain.Join(cmd.Process.Pid); err != nil {
		fmt.Fprintln(os.Stderr, "tessera supervise:", err)
	}
	return cmd, nil
}

func exitOf(err error) Exit {
	e := Exit{Finished: time.Now().UTC(), Reason: "exit status 0"}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			e.Code = 128 + int(ws.Signal())
			e.Reason = fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		} else {
			e.Code = ee.ExitCode()
			e.Reason = fmt.Sprintf("exit status %d", e.Code)
		}
	default:
		e.Code, e.Reason = 1, "wait: "+err.Error()
	}
	return e
}
