package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// buildPause builds the program as make pause-image does.
func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestPauseExitsZeroOnTermAndInt(t *testing.T) {
	bin := buildPause(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(stderr)
			// Its line says the signals are caught; a signal sent before
			// would kill it.
			if line, err := r.ReadString('\n'); err != nil || line != "pause: waiting for SIGTERM or SIGINT\n" {
				t.Fatalf("pause printed %q (%v), want its waiting line", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(r)
			if err := cmd.Wait(); err != nil {
				t.Errorf("pause after %s: %v, want exit 0", sig, err)
			}
			if len(rest) > 0 {
				t.Errorf("pause printed %q after the signal", rest)
			}
		})
	}
}

func TestPauseRefusesArguments(t *testing.T) {
	bin := buildPause(t)
	out, err := exec.Command(bin, "extra").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("pause extra: %v, want exit 2", err)
	}
	if !strings.Contains(string(out), `takes no arguments, got ["extra"]`) {
		t.Errorf("pause extra printed %q", out)
	}
}

// TestReapCollectsExitedChildren leaves a child a zombie, then reaps it.
func TestReapCollectsExitedChildren(t *testing.T) {
	var pids []int
	for range 3 {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Skipf("cannot start true: %v", err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	for _, pid := range pids { // each is a zombie once it has exited
		for state(t, pid) != "Z" {
			syscall.Nanosleep(&syscall.Timespec{Nsec: 1e6}, nil)
		}
	}
	reap()
	for _, pid := range pids {
		if s := state(t, pid); s != "" {
			t.Errorf("child %d is still there (state %s) after reap", pid, s)
		}
	}
}

// state is the process state letter of pid ("" when it is gone).
func state(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Skipf("cannot read /proc: %v", err)
	}
	// pid (comm) S ...: comm may hold spaces, so cut at the last ')'.
	s := string(data)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	f := strings.Fields(rest)
	if len(f) == 0 {
		t.Fatalf("cannot read %q", s)
	}
	return f[0]
}
