//go:build linux

package intercept

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
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

func TestLimitHoldsInEveryResolutionMode(t *testing.T) {
	a := buildAll(t)
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := a.base(t).with("TP_RESOLVE="+mode, "TESSERA_MEMORY_LIMIT=1Gi")
			r := a.run(t, e, "alloc:mem:600Mi", "alloc:mem:600Mi", "info", "free:0", "alloc:mem:600Mi", "stats")
			expectLines(t, r,
				allocLine("mem", 600*mib, 0),
				allocLine("mem", 600*mib, cudaErrorOutOfMemory),
				infoLine(gib-600*mib, gib),
				"free 0 rc=0",
				allocLine("mem", 600*mib, 0),
				"stats launches=0 managed=0 device=2")
		})
	}
}

func TestEveryAllocationPathIsCapped(t *testing.T) {
	a := buildAll(t)
	const size = 256 * mib
	pitched := func(n int64) int64 { return n / 1100 * 1280 } // the fake aligns pitch to 256
	paths := []struct {
		path    string
		charged func(int64) int64 // device bytes the descriptor amounts to
		pitch   bool
	}{
		{"mem", nil, false},
		{"mem1", nil, false},
		{"pitch", pitched, true},
		{"pitch1", pitched, true},
		{"managed", nil, false},
		{"async", nil, false},
		{"async_ptsz", nil, false},
		{"pool", nil, false},
		{"pool_ptsz", nil, false},
		{"vmm", nil, false},
		{"array", nil, false},
		{"array3d", nil, false},
		{"mipmap", func(n int64) int64 { return n + n/2 }, false}, // two levels
	}
	for _, mode := range []string{"link", "proc2"} {
		for _, p := range paths {
			t.Run(mode+"/"+p.path, func(t *testing.T) {
				t.Parallel()
				charged := func(n int64) int64 {
					if p.charged == nil {
						return n
					}
					return p.charged(n)
				}
				ok := func(n int64) string {
					if p.pitch {
						return allocLine(p.path, n, 0) + " pitch=1280"
					}
					return allocLine(p.path, n, 0)
				}
				e := a.base(t).with("TP_RESOLVE="+mode, "TESSERA_MEMORY_LIMIT=1Gi")
				r := a.run(t, e,
					"alloc:"+p.path+":256Mi", "info", "alloc:"+p.path+":800Mi", "free:0", "info",
					"alloc:"+p.path+":600Mi")
				expectLines(t, r,
					ok(size),
					infoLine(gib-charged(size), gib),
					allocLine(p.path, 800*mib, cudaErrorOutOfMemory),
					"free 0 rc=0",
					infoLine(gib, gib),
					ok(600*mib))
			})
		}
	}
}

func TestMemoryReporting(t *testing.T) {
	a := buildAll(t)
	t.Run("per-device limits", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi,2Gi")
		r := a.run(t, e, "info", "info1", "total:0", "total:1", "total1:1", "nvml:0",
			"dev:1", "alloc:mem:512Mi", "info", "nvml:1")
		expectLines(t, r,
			infoLine(gib, gib),
			fmt.Sprintf("info1 rc=0 free=%d total=%d", gib, gib),
			fmt.Sprintf("total dev=0 rc=0 bytes=%d", gib),
			fmt.Sprintf("total dev=1 rc=0 bytes=%d", 2*gib),
			fmt.Sprintf("total1 dev=1 rc=0 bytes=%d", 2*gib),
			fmt.Sprintf("nvml dev=0 rc=0 total=%d free=%d used=0", gib, gib),
			fmt.Sprintf("nvml2 dev=0 rc=0 total=%d free=%d used=0", gib, gib),
			allocLine("mem", 512*mib, 0),
			infoLine(2*gib-512*mib, 2*gib),
			fmt.Sprintf("nvml dev=1 rc=0 total=%d free=%d used=%d", 2*gib, 2*gib-512*mib, 512*mib),
			fmt.Sprintf("nvml2 dev=1 rc=0 total=%d free=%d used=%d", 2*gib, 2*gib-512*mib, 512*mib))
	})
	t.Run("one value applies to every device", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=3Gi")
		r := a.run(t, e, "total:1")
		expectLines(t, r, fmt.Sprintf("total dev=1 rc=0 bytes=%d", 3*gib))
	})
	t.Run("no limit passes the device through", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_CONTAINER_ID")
		r := a.run(t, e, "info", "total:0", "nvml:0", "alloc:mem:60Gi", "alloc:mem:30Gi")
		expectLines(t, r,
			infoLine(fakeDeviceBytes, fakeDeviceBytes),
			fmt.Sprintf("total dev=0 rc=0 bytes=%d", fakeDeviceBytes),
			fmt.Sprintf("nvml dev=0 rc=0 total=%d free=%d used=0", fakeDeviceBytes, fakeDeviceBytes),
			fmt.Sprintf("nvml2 dev=0 rc=0 total=%d free=%d used=0", fakeDeviceBytes, fakeDeviceBytes),
			allocLine("mem", 60*gib, 0),
			allocLine("mem", 30*gib, cudaErrorOutOfMemory)) // the fake device is full
		if r.stderr != "" {
			t.Errorf("unexpected stderr: %s", r.stderr)
		}
	})
	t.Run("limit above the device is capped at the device", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi")
		r := a.run(t, e, "info", "alloc:mem:90Gi")
		expectLines(t, r, infoLine(fakeDeviceBytes, fakeDeviceBytes), allocLine("mem", 90*gib, cudaErrorOutOfMemory))
	})
}

// acctUsage reads the accounting file as the arbiter would (layout v1 in
// docs/enforcement.md) and returns pid -> bytes used on device 0.
func acctUsage(t *testing.T, path string) map[int32]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) < 256 || le.Uint32(b[0:]) != 0x43415354 || le.Uint16(b[4:]) != 1 {
		t.Fatalf("accounting file %s: bad header", path)
	}
	hdr, slot, n := int(le.Uint32(b[8:])), int(le.Uint32(b[12:])), int(le.Uint32(b[16:]))
	if hdr != 256 || slot != 144 || n != 512 || len(b) < hdr+slot*n {
		t.Fatalf("accounting file %s: header %d slot %d slots %d size %d", path, hdr, slot, n, len(b))
	}
	out := map[int32]uint64{}
	for i := 0; i < n; i++ {
		s := b[hdr+i*slot:]
		if pid := int32(le.Uint32(s[0:])); pid != 0 {
			out[pid] = le.Uint64(s[16:])
		}
	}
	return out
}

func TestLimitSpansProcessesAndSurvivesSIGKILL(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	acct := filepath.Join(e["TESSERA_SHM_DIR"], "tessera-ctr-1.acct")

	holder := a.start(t, e, "alloc:mem:600Mi", "hold")
	if got := holder.next(t); got != allocLine("mem", 600*mib, 0) {
		t.Fatalf("holder: %q", got)
	}
	if got := holder.next(t); got != "holding" {
		t.Fatalf("holder: %q", got)
	}
	if got := acctUsage(t, acct)[int32(holder.cmd.Process.Pid)]; got != uint64(600*mib) {
		t.Fatalf("accounting file shows %d bytes for the holder, want %d", got, 600*mib)
	}

	// A second process sees the holder's usage and cannot exceed the sum.
	r := a.run(t, e, "info", "alloc:mem:600Mi", "alloc:mem:300Mi", "info")
	expectLines(t, r,
		infoLine(gib-600*mib, gib),
		allocLine("mem", 600*mib, cudaErrorOutOfMemory),
		allocLine("mem", 300*mib, 0),
		infoLine(gib-900*mib, gib))

	// That process exited normally: its slot is gone. Kill the holder with
	// SIGKILL (no destructor runs); the next allocator reclaims its slot.
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := holder.exitCode(t); code != -1 {
		t.Fatalf("holder exit code %d, want -1 (killed)", code)
	}
	r = a.run(t, e, "alloc:mem:600Mi", "info")
	expectLines(t, r, allocLine("mem", 600*mib, 0), infoLine(gib-600*mib, gib))
	if left := acctUsage(t, acct); len(left) != 0 {
		t.Fatalf("accounting slots left after every process exited: %v", left)
	}
}

func TestConcurrentAllocatorsNeverOvershoot(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	// Three processes of four threads each allocate 10Mi until refused and
	// then hold what they got: together they must end at exactly
	// floor(1Gi / 10Mi) allocations, no more (overshoot) and no fewer
	// (lost updates).
	var procs []*live
	for i := 0; i < 3; i++ {
		procs = append(procs, a.start(t, e, "race:4:10Mi", "hold"))
	}
	total := 0
	for _, p := range procs {
		var n int
		if _, err := fmt.Sscanf(p.next(t), "raced %d", &n); err != nil {
			t.Fatal(err)
		}
		if got := p.next(t); got != "holding" {
			t.Fatalf("got %q", got)
		}
		total += n
	}
	if want := int(gib / (10 * mib)); total != want {
		t.Fatalf("%d allocations of 10Mi succeeded across processes, want exactly %d", total, want)
	}
	for _, p := range procs {
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
}

func TestUnusableAccountingDirFailsClosed(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_SHM_DIR="+filepath.Join(t.TempDir(), "missing"))
	r := a.run(t, e, "alloc:mem:1Mi", "launch:kernel:1")
	expectLines(t, r, allocLine("mem", mib, cudaErrorOutOfMemory), "launch kernel 1 rc=0")
	if !strings.Contains(r.stderr, "cannot open accounting file") {
		t.Fatalf("stderr: %q", r.stderr)
	}
}

func TestLockHolderDeathDoesNotWedgeTheContainer(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	acct := filepath.Join(e["TESSERA_SHM_DIR"], "tessera-ctr-1.acct")
	expectLines(t, a.run(t, e, "alloc:mem:100Mi"), allocLine("mem", 100*mib, 0)) // creates the file
	r := a.run(t, e.with("LD_PRELOAD"), "lockdie:"+acct)
	if r.code != -1 || r.stdout != "locked rc=0\n" {
		t.Fatalf("lock holder: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The next process gets EOWNERDEAD, makes the lock consistent, goes on.
	expectLines(t, a.run(t, e, "alloc:mem:600Mi", "info"), allocLine("mem", 600*mib, 0), infoLine(gib-600*mib, gib))
}

func TestForkedChildKilledLeavesNoCharge(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	// The child (forked after the library loaded) allocates 600Mi and is
	// SIGKILLed; the parent allocates 600Mi while the child is a zombie.
	r := a.run(t, e, "forkkill:600Mi", "info")
	expectLines(t, r, "forkkill child=0 parent=0", infoLine(gib-600*mib, gib))
}

func TestOversubscription(t *testing.T) {
	a := buildAll(t)
	t.Run("device allocations become managed", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi", "TESSERA_OVERSUBSCRIBE=1")
		r := a.run(t, e, "alloc:mem:90Gi", "info", "alloc:mem:20Gi", "alloc:pitch:1Gi", "free:0", "stats")
		expectLines(t, r,
			allocLine("mem", 90*gib, 0), // more than the 80 GiB device: spills to host
			infoLine(10*gib, 100*gib),
			allocLine("mem", 20*gib, cudaErrorOutOfMemory), // the limit still holds
			allocLine("pitch", gib, 0)+" pitch=1536",
			"free 0 rc=0",
			"stats launches=0 managed=2 device=0")
	})
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi")
		r := a.run(t, e, "alloc:mem:10Gi", "stats")
		expectLines(t, r, allocLine("mem", 10*gib, 0), "stats launches=0 managed=0 device=1")
	})
}

func TestBadEnvironmentFailsClosed(t *testing.T) {
	a := buildAll(t)
	cases := []struct {
		set  []string
		name string // the variable the error must name
	}{
		{[]string{"TESSERA_MEMORY_LIMIT=lots"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT="}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=0"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=-1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1.5Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=2Pi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=2000T"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi,,1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=" + strings.Repeat("1Gi,", 16) + "1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_CONTAINER_ID=../etc"}, "TESSERA_CONTAINER_ID"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_CONTAINER_ID"}, "TESSERA_CONTAINER_ID"},
		{[]string{"TESSERA_SHM_DIR=relative/dir"}, "TESSERA_SHM_DIR"},
		{[]string{"TESSERA_ARBITER_REGION=grant"}, "TESSERA_ARBITER_REGION"},
		{[]string{"TESSERA_OVERSUBSCRIBE=yes"}, "TESSERA_OVERSUBSCRIBE"},
		{[]string{"TESSERA_COMPUTE_FAIL=sometimes"}, "TESSERA_COMPUTE_FAIL"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.set, " "), func(t *testing.T) {
			t.Parallel()
			r := a.run(t, a.base(t).with(c.set...), "alloc:mem:1Mi", "launch:kernel:1", "info", "alloc:managed:1Mi")
			expectLines(t, r,
				allocLine("mem", mib, cudaErrorOutOfMemory),
				fmt.Sprintf("launch kernel 1 rc=%d", cudaErrorNotPermited),
				infoLine(0, fakeDeviceBytes),
				allocLine("managed", mib, cudaErrorOutOfMemory))
			errLines := splitLines(r.stderr)
			if len(errLines) != 1 || !strings.Contains(errLines[0], c.name) || !strings.Contains(errLines[0], "failing closed") {
				t.Fatalf("want one error line naming %s and saying it fails closed, got:\n%s", c.name, r.stderr)
			}
		})
	}
	t.Run("bad log level is reported but not enforced", func(t *testing.T) {
		t.Parallel()
		r := a.run(t, a.base(t).with("TESSERA_LOG_LEVEL=loud", "TESSERA_MEMORY_LIMIT=1Gi"), "alloc:mem:1Mi")
		expectLines(t, r, allocLine("mem", mib, 0))
		if !strings.Contains(r.stderr, "TESSERA_LOG_LEVEL") {
			t.Fatalf("stderr does not name TESSERA_LOG_LEVEL: %q", r.stderr)
		}
	})
}

// ---- entry-point resolution ----

func TestWrappersReturnedByDlsymAndGetProcAddress(t *testing.T) {
	a := buildAll(t)
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := a.run(t, a.base(t).with("TP_RESOLVE="+mode), "procaddr")
			lines := r.lines()
			if r.code != 0 || len(lines) < 30 {
				t.Fatalf("exit %d, %d lines:\n%s\n%s", r.code, len(lines), r.stdout, r.stderr)
			}
			for _, l := range lines[:len(lines)-1] {
				if !strings.HasSuffix(l, "wrapper=1 fake=0") {
					t.Errorf("%s: hooked symbol did not resolve to the tessera wrapper", l)
				}
			}
			if last := lines[len(lines)-1]; last != "procaddr cuDeviceGetName fake=1" {
				t.Errorf("unhooked symbol: %q, want the driver's own", last)
			}
		})
	}
	t.Run("by name when the driver's table holds other addresses", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TP_RESOLVE=proc2", "FAKE_PROCADDR_TRAMPOLINE=1", "TESSERA_MEMORY_LIMIT=1Gi")
		r := a.run(t, e, "alloc:mem:600Mi", "alloc:mem:600Mi", "launch:kernel:1", "launch:kernel_ptsz:1", "stats")
		expectLines(t, r,
			allocLine("mem", 600*mib, 0),
			allocLine("mem", 600*mib, cudaErrorOutOfMemory),
			"launch kernel 1 rc=0",
			"launch kernel_ptsz 1 rc=0",
			"stats launches=2 managed=0 device=1")
	})
}

// ---- compute ----

// region is the compute grant file as the arbiter writes it (layout v1 in
// docs/enforcement.md); the test plays the arbiter.
type region struct {
	path string
	mem  []byte
}

const grantMagic = 0x52475354 // "TSGR"

func monoNow() uint64 {
	var ts syscall.Timespec
	// CLOCK_MONOTONIC (1), the heartbeat's clock.
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

// createRegion writes a region with one record per token count, publishing
// the magic last as the protocol requires.
func createRegion(tb testing.TB, path string, staleMs uint32, heartbeat uint64, tokens ...int64) *region {
	tb.Helper()
	size := 64 + 64*len(tokens)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		tb.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Munmap(mem) })
	r := &region{path: path, mem: mem}
	le := binary.LittleEndian
	le.PutUint16(mem[4:], 1)  // version_major
	le.PutUint16(mem[6:], 0)  // version_minor
	le.PutUint32(mem[8:], 64) // header_size
	le.PutUint32(mem[12:], 64)
	le.PutUint32(mem[16:], uint32(len(tokens)))
	le.PutUint32(mem[20:], staleMs)
	r.beat(heartbeat)
	for i, n := range tokens {
		atomic.StoreInt64(r.tokens(i), n)
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[0])), grantMagic)
	return r
}

func (r *region) word(dev, off int) unsafe.Pointer { return unsafe.Pointer(&r.mem[64+64*dev+off]) }
func (r *region) tokens(dev int) *int64            { return (*int64)(r.word(dev, 0)) }
func (r *region) waiters(dev int) *uint64          { return (*uint64)(r.word(dev, 8)) }
func (r *region) waits(dev int) *uint64            { return (*uint64)(r.word(dev, 16)) }
func (r *region) ungated(dev int) *uint64          { return (*uint64)(r.word(dev, 24)) }
func (r *region) beat(ns uint64)                   { atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.mem[24])), ns) }

const (
	fresh   = 600_000 // stale_after_ms long enough that tests never see staleness
	ancient = 1       // a heartbeat long past on any machine
)

func TestLaunchesWaitForGrants(t *testing.T) {
	a := buildAll(t)
	for _, mode := range []string{"link", "proc2"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := a.base(t).with("TP_RESOLVE=" + mode)
			g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), 0)
			e["TESSERA_ARBITER_REGION"] = g.path
			p := a.start(t, e, "launch:kernel:3", "launch:ex_ptsz:2", "stats")

			eventually(t, "the first launch waits", func() bool { return atomic.LoadUint64(g.waiters(0)) == 1 })
			p.noOutputYet(t)
			atomic.AddInt64(g.tokens(0), 3)
			for i := 1; i <= 3; i++ {
				if got, want := p.next(t), fmt.Sprintf("launch kernel %d rc=0", i); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
			eventually(t, "the fourth launch waits", func() bool {
				return atomic.LoadUint64(g.waits(0)) == 2 && atomic.LoadUint64(g.waiters(0)) == 1
			})
			p.noOutputYet(t)
			if n := atomic.LoadInt64(g.tokens(0)); n != 0 {
				t.Fatalf("tokens = %d after three granted launches, want 0", n)
			}
			atomic.AddInt64(g.tokens(0), 2)
			for _, want := range []string{"launch ex_ptsz 1 rc=0", "launch ex_ptsz 2 rc=0", "stats launches=5 managed=0 device=0"} {
				if got := p.next(t); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
			if w := atomic.LoadUint64(g.waiters(0)); w != 0 {
				t.Fatalf("waiters = %d after exit", w)
			}
		})
	}
}

func TestEveryLaunchPathTakesAToken(t *testing.T) {
	a := buildAll(t)
	kinds := []string{"kernel", "kernel_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz", "graph", "graph_ptsz"}
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), int64(len(kinds)))
			var args, want []string
			for _, k := range kinds {
				args = append(args, "launch:"+k+":1")
				want = append(want, "launch "+k+" 1 rc=0")
			}
			r := a.run(t, a.base(t).with("TP_RESOLVE="+mode, "TESSERA_ARBITER_REGION="+g.path), args...)
			expectLines(t, r, want...)
			if n, w := atomic.LoadInt64(g.tokens(0)), atomic.LoadUint64(g.waits(0)); n != 0 || w != 0 {
				t.Fatalf("tokens %d waits %d after %d launches with %d tokens; want 0 and 0", n, w, len(kinds), len(kinds))
			}
		})
	}
}

func TestGrantRecordPerDevice(t *testing.T) {
	a := buildAll(t)
	g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), 0, 4)
	r := a.run(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path), "dev:1", "launch:kernel:4")
	expectLines(t, r, "launch kernel 1 rc=0", "launch kernel 2 rc=0", "launch kernel 3 rc=0", "launch kernel 4 rc=0")
	if d0, d1 := atomic.LoadInt64(g.tokens(0)), atomic.LoadInt64(g.tokens(1)); d0 != 0 || d1 != 0 {
		t.Fatalf("tokens %d/%d, want 0/0: device 1's launches must draw on record 1", d0, d1)
	}
}

func TestComputeFailurePolicy(t *testing.T) {
	a := buildAll(t)
	launches := []string{"launch:kernel:2", "stats"}
	ran := []string{"launch kernel 1 rc=0", "launch kernel 2 rc=0", "stats launches=2 managed=0 device=0"}

	t.Run("no region configured: ungated, silent", func(t *testing.T) {
		t.Parallel()
		r := a.run(t, a.base(t).with("TESSERA_COMPUTE_FAIL=closed"), launches...)
		expectLines(t, r, ran...)
		if r.stderr != "" {
			t.Fatalf("unexpected stderr: %s", r.stderr)
		}
	})
	t.Run("missing region, open: ungated, logged once", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_ARBITER_REGION=" + filepath.Join(t.TempDir(), "absent"))
		r := a.run(t, e, launches...)
		expectLines(t, r, ran...)
		if n := strings.Count(r.stderr, "running kernel launches ungated"); n != 1 {
			t.Fatalf("want one fail-open warning, got %d:\n%s", n, r.stderr)
		}
	})
	t.Run("stale region, open: ungated and counted", func(t *testing.T) {
		t.Parallel()
		g := createRegion(t, filepath.Join(t.TempDir(), "grant"), 1000, ancient, 0)
		r := a.run(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path), launches...)
		expectLines(t, r, ran...)
		if n := atomic.LoadUint64(g.ungated(0)); n != 2 {
			t.Fatalf("ungated = %d, want 2", n)
		}
		if !strings.Contains(r.stderr, "is stale") {
			t.Fatalf("no stale warning:\n%s", r.stderr)
		}
	})
	t.Run("missing region, closed: waits until the arbiter publishes", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "grant")
		p := a.start(t, a.base(t).with("TESSERA_ARBITER_REGION="+path, "TESSERA_COMPUTE_FAIL=closed"), launches...)
		p.waitStderr(t, "wait for the arbiter")
		p.noOutputYet(t)
		createRegion(t, path, fresh, monoNow(), 2)
		for _, want := range ran {
			if got := p.next(t); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("stale region, closed: waits for a heartbeat", func(t *testing.T) {
		t.Parallel()
		g := createRegion(t, filepath.Join(t.TempDir(), "grant"), 1000, ancient, 0)
		p := a.start(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path, "TESSERA_COMPUTE_FAIL=closed"), launches...)
		eventually(t, "the launch waits", func() bool { return atomic.LoadUint64(g.waiters(0)) == 1 })
		p.noOutputYet(t)
		g.beat(monoNow())
		atomic.AddInt64(g.tokens(0), 2)
		for _, want := range ran {
			if got := p.next(t); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if n := atomic.LoadUint64(g.ungated(0)); n != 0 {
			t.Fatalf("ungated = %d under fail-closed", n)
		}
	})
}

// BenchmarkLaunchOverhead measures cuLaunchKernel through the fake driver
// natively, through the library without a grant region (ungated) and
// through the library drawing tokens from a region (gated), and reports
// launches per second and the ratios to native.
func BenchmarkLaunchOverhead(b *testing.B) {
	a := buildAll(b)
	g := createRegion(b, filepath.Join(b.TempDir(), "grant"), fresh, monoNow(), 1<<62)
	base := a.base(b)
	configs := []struct {
		name string
		env  env
	}{
		{"native", base.with("LD_PRELOAD")},
		{"ungated", base},
		{"gated", base.with("TESSERA_ARBITER_REGION=" + g.path)},
	}
	const launches = 2_000_000
	var ns [3]float64
	for b.Loop() {
		for i, c := range configs {
			cmd := exec.Command(a.bench, fmt.Sprint(launches))
			cmd.Env = c.env.list()
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			var n int
			var per float64
			if _, err := fmt.Sscanf(string(out), "launches=%d ns_per_launch=%g", &n, &per); err != nil {
				b.Fatalf("%s: %q: %v", c.name, out, err)
			}
			ns[i] += per
		}
	}
	for i, c := range configs {
		b.ReportMetric(1e9/(ns[i]/float64(b.N)), "launches/s-"+c.name)
	}
	b.ReportMetric(ns[0]/ns[1], "ratio-ungated")
	b.ReportMetric(ns[0]/ns[2], "ratio-gated")
}
