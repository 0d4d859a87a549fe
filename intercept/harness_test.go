//go:build linux

package intercept

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// libCFlags must match CFLAGS in Makefile.
var libCFlags = []string{
	"-std=c11", "-D_GNU_SOURCE", "-fPIC", "-fvisibility=hidden", "-pthread",
	"-Wall", "-Wextra", "-Werror", "-O2", "-g",
}

// progCFlags build the fakes and test programs.
var progCFlags = []string{"-std=c11", "-D_GNU_SOURCE", "-pthread", "-Wall", "-Wextra", "-Werror", "-O2", "-Isrc"}

const (
	gib = int64(1) << 30
	mib = int64(1) << 20

	fakeDeviceBytes = 80 * gib // what the fake driver and fake NVML report

	cudaErrorOutOfMemory = 2
	cudaErrorNotPermited = 800

	// Deadline for anything a test waits on; only a broken library hits it.
	patience = 30 * time.Second
)

type artifacts struct {
	dir, lib, tprog, bench string
}

var (
	buildOnce sync.Once
	buildDir  string
	built     artifacts
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildAll compiles the library, the fake driver and NVML, and the test
// programs once per test binary.
func buildAll(tb testing.TB) artifacts {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		tb.Skip("gcc not found: the interception library, the fake driver and the test programs are C and need gcc")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "tessera-intercept-")
		if buildErr == nil {
			built, buildErr = compile(buildDir)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

func compile(dir string) (artifacts, error) {
	a := artifacts{
		dir:   dir,
		lib:   filepath.Join(dir, "libtessera-intercept.so"),
		tprog: filepath.Join(dir, "tprog"),
		bench: filepath.Join(dir, "bench"),
	}
	srcs, err := filepath.Glob("src/*.c")
	if err != nil || len(srcs) == 0 {
		return a, fmt.Errorf("no C sources in src/: %v", err)
	}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	// TESSERA_INTERCEPT_CFLAGS adds flags to the library build, e.g.
	// "-fsanitize=undefined -fno-sanitize-recover=all" for a UBSan run.
	extra := strings.Fields(os.Getenv("TESSERA_INTERCEPT_CFLAGS"))
	libs := [][]string{
		cat(libCFlags, extra, []string{"-shared", "-Wl,-z,defs", "-Wl,-z,now", "-o", a.lib}, srcs, []string{"-ldl"}),
		cat(progCFlags, []string{"-fPIC", "-shared", "-Wl,-Bsymbolic", "-Wl,-soname,libcuda.so.1",
			"-o", filepath.Join(dir, "libcuda.so.1"), "testdata/fake/fake_cuda.c"}),
		cat(progCFlags, []string{"-fPIC", "-shared", "-Wl,-Bsymbolic", "-Wl,-soname,libnvidia-ml.so.1",
			"-o", filepath.Join(dir, "libnvidia-ml.so.1"), "testdata/fake/fake_nvml.c"}),
	}
	progs := [][]string{
		cat(progCFlags, []string{"-o", a.tprog, "testdata/progs/tprog.c", "-L" + dir,
			"-l:libcuda.so.1", "-l:libnvidia-ml.so.1", "-ldl"}),
		cat(progCFlags, []string{"-o", a.bench, "testdata/progs/bench.c", "-L" + dir, "-l:libcuda.so.1"}),
	}
	for _, group := range [][][]string{libs, progs} { // programs link against the fakes
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, args := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := exec.Command("gcc", args...).CombinedOutput()
				if err != nil {
					errs[i] = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return a, err
		}
	}
	return a, nil
}

// env is a process environment; tests start from base and override.
type env map[string]string

func (a artifacts) base(tb testing.TB) env {
	return env{
		"PATH":                 os.Getenv("PATH"),
		"LD_LIBRARY_PATH":      a.dir,
		"LD_PRELOAD":           a.lib,
		"TESSERA_SHM_DIR":      tb.TempDir(),
		"TESSERA_CONTAINER_ID": "ctr-1",
	}
}

// with returns a copy with "K=V" set and bare "K" removed.
func (e env) with(kvs ...string) env {
	out := env{}
	for k, v := range e {
		out[k] = v
	}
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		} else {
			delete(out, kv)
		}
	}
	return out
}

func (e env) list() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) lines() []string { return splitLines(r.stdout) }

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (a artifacts) run(t *testing.T, e env, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.tprog, args...)
	cmd.Env = e.list()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("tprog %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("tprog %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", args, patience, so.String(), se.String())
	}
	return result{so.String(), se.String(), code}
}

func expectLines(t *testing.T, r result, want ...string) {
	t.Helper()
	got := r.lines()
	if r.code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exit %d\ngot:\n%s\nwant:\n%s\nstderr:\n%s", r.code, strings.Join(got, "\n"),
			strings.Join(want, "\n"), r.stderr)
	}
}

// live is a running tprog whose output the test reads as it comes.
type live struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan string
	errOut chan string
	done   chan struct{}
}

func (a artifacts) start(t *testing.T, e env, args ...string) *live {
	t.Helper()
	cmd := exec.Command(a.tprog, args...)
	cmd.Env = e.list()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &live{cmd: cmd, stdin: stdin, out: make(chan string, 1000), errOut: make(chan string, 1000),
		done: make(chan struct{})}
	var wg sync.WaitGroup
	pump := func(r io.Reader, ch chan string) {
		defer wg.Done()
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
		close(ch)
	}
	wg.Add(2)
	go pump(stdout, l.out)
	go pump(stderr, l.errOut)
	go func() { wg.Wait(); close(l.done) }()
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		<-l.done
		l.cmd.Wait()
	})
	return l
}

// next returns the next stdout line.
func (l *live) next(t *testing.T) string {
	t.Helper()
	select {
	case s, ok := <-l.out:
		if !ok {
			t.Fatal("tprog closed stdout early")
		}
		return s
	case <-time.After(patience):
		t.Fatal("no output from tprog")
	}
	return ""
}

// noOutputYet fails if a stdout line is already waiting.
func (l *live) noOutputYet(t *testing.T) {
	t.Helper()
	select {
	case s := <-l.out:
		t.Fatalf("unexpected output while the launch should be blocked: %q", s)
	default:
	}
}

func (l *live) waitStderr(t *testing.T, substr string) {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case s, ok := <-l.errOut:
			if !ok {
				t.Fatalf("stderr closed before %q", substr)
			}
			if strings.Contains(s, substr) {
				return
			}
		case <-deadline:
			t.Fatalf("no stderr line containing %q", substr)
		}
	}
}

func (l *live) exitCode(t *testing.T) int {
	t.Helper()
	l.stdin.Close()
	select {
	case <-l.done:
	case <-time.After(patience):
		t.Fatal("tprog did not exit")
	}
	err := l.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func allocLine(path string, size int64, rc int) string {
	return fmt.Sprintf("alloc %s %d rc=%d", path, size, rc)
}

func infoLine(free, total int64) string {
	return fmt.Sprintf("info rc=0 free=%d total=%d", free, total)
}

var resolveModes = []string{"link", "dlsym", "proc", "proc2"}

// ---- memory ----
