package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
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
	var spec Spec
	if err := readJSON(filepath.Join(jobDir, SpecFile), &spec); err != nil {
		return fmt.Errorf("read job spec: %w", err)
	}
	if len(spec.Command) == 0 {
		return fmt.Errorf("job spec: command is empty")
	}
	stdout, err := os.OpenFile(filepath.Join(jobDir, StdoutFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open stdout log: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(jobDir, StderrFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open stderr log: %w", err)
	}
	defer stderr.Close()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = spec.Env, spec.Dir, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "tessera: cannot start %s: %v\n", spec.Command[0], err)
		return WriteJSON(filepath.Join(jobDir, ExitFile), Exit{Code: 127, Reason: "cannot start: " + err.Error(), Finished: time.Now().UTC()})
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
			if kill == nil && spec.StopGrace > 0 {
				kill = time.After(spec.StopGrace)
			}
		case <-kill:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case werr = <-done:
			break wait
		}
	}
	return WriteJSON(filepath.Join(jobDir, ExitFile), exitOf(werr))
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
