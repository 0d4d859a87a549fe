package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is a started control-plane binary with its log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startProcess runs bin with args in its own process group, logging to
// dir/name.log (appending, so a restarted component keeps one log).
func startProcess(name, bin, dir string, args ...string) (*process, error) {
	return startProcessEnv(name, bin, dir, nil, args...)
}

// startProcessEnv is startProcess with env ("KEY=value") added to the
// environment.
func startProcessEnv(name, bin, dir string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		f.Close()
	}()
	return p, nil
}

// stop ends the process group: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if gone, _ := p.exited(); gone {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		err = <-p.done
	}
	p.done <- err // stop and kill may be called again (Cluster.Stop after a test's own)
}

// kill ends the process group at once (SIGKILL) and waits for the process.
func (p *process) kill() {
	if p == nil {
		return
	}
	if gone, _ := p.exited(); gone {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// exited reports whether the process has ended, without waiting.
func (p *process) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// logTail returns the last lines of the process's log, for error messages.
func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls ready until it returns nil, the process exits, or ctx ends.
func (p *process) waitFor(ctx context.Context, ready func(context.Context) error) error {
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		if gone, err := p.exited(); gone {
			return fmt.Errorf("%s exited (%v) before it was ready; log tail:\n%s", p.name, err, p.logTail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %v (last check: %v); log tail:\n%s", p.name, ctx.Err(), last, p.logTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts reserves n distinct loopback TCP ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
