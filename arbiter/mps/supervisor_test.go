package mps

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
)

// clock hands out waits one at a time: every After call is reported on
// asked with its duration and returns only when the test calls tick.
type clock struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newClock() *clock {
	return &clock{asked: make(chan time.Duration, 100), fire: make(chan time.Time)}
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.asked <- d
	return c.fire
}

// next returns the duration of the next wait the supervisor enters.
func (c *clock) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.asked:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor never waited")
		return 0
	}
}

// tick ends the wait the supervisor is in.
func (c *clock) tick(t *testing.T) {
	t.Helper()
	select {
	case c.fire <- time.Time{}:
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor is not waiting")
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const (
	gpuA = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
	gpuB = "GPU-bbbbbbbb-1111-2222-3333-444444444444"
)

// testConfig is a config on the fake with short, distinct durations.
func testConfig(t *testing.T, c *clock, gpus ...string) Config {
	return Config{
		Binary: mpstest.Write(t), Root: mpstest.ShortDir(t), GPUs: gpus,
		CheckEvery: 7 * time.Second, MinBackoff: 2 * time.Second, MaxBackoff: 5 * time.Second,
		Env:   []string{"PATH=" + os.Getenv("PATH"), "FAKE_INHERITED=yes", "CUDA_VISIBLE_DEVICES=all"},
		After: c.After, Logger: quiet(),
	}
}

func startLine(s *Supervisor, uuid string) string {
	return "start visible=" + uuid + " pipe=" + s.PipeDir(uuid) + " log=" + s.LogDir(uuid) + " inherited=yes"
}

// run starts s.Run and returns a function that cancels it and waits.
func run(t *testing.T, s *Supervisor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestStartsOneDaemonPerGPUAndQuitsThem(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA, gpuB))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	// Both daemons started and answered: each supervisor now waits for
	// its first periodic check.
	for range 2 {
		if d := c.next(t); d != 7*time.Second {
			t.Fatalf("first wait = %v, want CheckEvery", d)
		}
	}
	for _, u := range []string{gpuA, gpuB} {
		if got, want := mpstest.Log(t, s.LogDir(u)), []string{startLine(s, u)}; !slices.Equal(got, want) {
			t.Errorf("%s: fake saw %q, want %q", u, got, want)
		}
		for _, dir := range []string{s.PipeDir(u), s.LogDir(u)} {
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("%s: %v, %v; want a 0755 folder", dir, fi, err)
			}
		}
	}
	out, err := s.Control(context.Background(), gpuA, healthCommand)
	if err != nil || strings.TrimSpace(out) != "100.0" {
		t.Errorf("Control = %q, %v", out, err)
	}
	stop()
	for _, u := range []string{gpuA, gpuB} {
		got := mpstest.Log(t, s.LogDir(u))
		if len(got) == 0 || got[len(got)-1] != "cmd quit" {
			t.Errorf("%s: fake saw %q, want quit last", u, got)
		}
		if mpstest.Running(s.PipeDir(u)) {
			t.Errorf("%s: the daemon still runs after Run returned", u)
		}
	}
}

func TestRestartsADeadDaemonWithBackoff(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA))
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	kill := func() { mpstest.Kill(t, s.PipeDir(gpuA)) }
	expect := func(want time.Duration, what string) {
		t.Helper()
		if d := c.next(t); d != want {
			t.Fatalf("%s: waited %v, want %v", what, d, want)
		}
	}
	expect(7*time.Second, "started")
	kill()
	c.tick(t) // the check finds it dead
	expect(2*time.Second, "first death: MinBackoff")
	c.tick(t) // restart
	expect(7*time.Second, "restarted")
	kill()
	c.tick(t)
	expect(4*time.Second, "died again before a good check: backoff doubled")
	c.tick(t)
	expect(7*time.Second, "restarted")
	kill()
	c.tick(t)
	expect(5*time.Second, "doubled again, capped at MaxBackoff")
	c.tick(t)
	expect(7*time.Second, "restarted")
	c.tick(t) // a good check resets the backoff
	expect(7*time.Second, "alive")
	kill()
	c.tick(t)
	expect(2*time.Second, "after a good check: MinBackoff again")
	c.tick(t)
	expect(7*time.Second, "restarted")
	starts := 0
	for _, l := range mpstest.Log(t, s.LogDir(gpuA)) {
		if l == startLine(s, gpuA) {
			starts++
		}
	}
	if starts != 5 {
		t.Errorf("daemon started %d times, want 5 (once, then after each of 4 deaths)", starts)
	}
}

func TestAnAnswerThatIsNoPercentageIsDeath(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA))
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	if d := c.next(t); d != 7*time.Second {
		t.Fatalf("waited %v, want CheckEvery", d)
	}
	mpstest.Answer(t, s.PipeDir(gpuA), "Cannot find MPS control daemon process")
	c.tick(t)
	if d := c.next(t); d != 2*time.Second {
		t.Fatalf("after a wrong answer: waited %v, want MinBackoff before a restart", d)
	}
	mpstest.Answer(t, s.PipeDir(gpuA), "37.5")
	c.tick(t) // the daemon answers again: adopted, not started twice
	if d := c.next(t); d != 7*time.Second {
		t.Fatalf("waited %v, want CheckEvery", d)
	}
	if got, want := mpstest.Log(t, s.LogDir(gpuA)), []string{startLine(s, gpuA)}; !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q", got, want)
	}
}

func TestRetriesAFailedStart(t *testing.T) {
	c := newClock()
	cfg := testConfig(t, c, gpuA)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mpstest.RefuseStart(t, s.PipeDir(gpuA), true)
	stop := run(t, s)
	if d := c.next(t); d != 2*time.Second {
		t.Fatalf("after a failed start: waited %v, want MinBackoff", d)
	}
	c.tick(t)
	if d := c.next(t); d != 4*time.Second {
		t.Fatalf("after a second failed start: waited %v, want 2 × MinBackoff", d)
	}
	mpstest.RefuseStart(t, s.PipeDir(gpuA), false)
	c.tick(t)
	if d := c.next(t); d != 7*time.Second {
		t.Fatalf("after a good start: waited %v, want CheckEvery", d)
	}
	stop()
	want := []string{"start-failed", "start-failed", startLine(s, gpuA), "cmd quit"}
	if got := mpstest.Log(t, s.LogDir(gpuA)); !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q", got, want)
	}
	out, err := os.ReadFile(filepath.Join(s.LogDir(gpuA), "tessera-start.out"))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 {
		t.Errorf("start output of the good start = %q, want empty", out)
	}
}

func TestAdoptsARunningDaemon(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA))
	if err != nil {
		t.Fatal(err)
	}
	mpstest.Adopt(t, s.PipeDir(gpuA)) // an earlier agent left a daemon running
	stop := run(t, s)
	if d := c.next(t); d != 7*time.Second {
		t.Fatalf("waited %v, want CheckEvery", d)
	}
	stop()
	if got, want := mpstest.Log(t, s.LogDir(gpuA)), []string{"cmd quit"}; !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q (adopted, not started again)", got, want)
	}
}

func TestStopBeforeAnyDaemonRan(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA))
	if err != nil {
		t.Fatal(err)
	}
	mpstest.RefuseStart(t, s.PipeDir(gpuA), true)
	stop := run(t, s)
	c.next(t)
	stop()
	if got, want := mpstest.Log(t, s.LogDir(gpuA)), []string{"start-failed"}; !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q (no quit to a daemon that never ran)", got, want)
	}
}

func TestControl(t *testing.T) {
	c := newClock()
	s, err := New(testConfig(t, c, gpuA))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Control(context.Background(), gpuA, "get_server_list")
	if err == nil || !strings.Contains(err.Error(), "Cannot find MPS control daemon process") || !strings.Contains(err.Error(), gpuA) {
		t.Errorf("no daemon: err = %v", err)
	}
	if _, err := s.Control(context.Background(), gpuB, "quit"); err == nil || !strings.Contains(err.Error(), "no daemon is configured") {
		t.Errorf("unknown GPU: err = %v", err)
	}
	for _, dir := range []string{s.PipeDir(gpuA), s.LogDir(gpuA)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.start(context.Background(), gpuA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Control(context.Background(), gpuA, "set_default_active_thread_percentage 50", "get_server_list"); err != nil {
		t.Fatal(err)
	}
	want := []string{startLine(s, gpuA), "cmd set_default_active_thread_percentage 50", "cmd get_server_list"}
	if got := mpstest.Log(t, s.LogDir(gpuA)); !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q", got, want)
	}
}

func TestDefaultBinaryFromPATH(t *testing.T) {
	fake := mpstest.Write(t)
	t.Setenv("PATH", filepath.Dir(fake)+string(os.PathListSeparator)+os.Getenv("PATH"))
	c := newClock()
	cfg := testConfig(t, c, gpuA)
	cfg.Binary, cfg.Env = "", nil // defaults: PATH lookup, this process's environment
	t.Setenv("FAKE_INHERITED", "yes")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	c.next(t)
	stop()
	if got, want := mpstest.Log(t, s.LogDir(gpuA)), []string{startLine(s, gpuA), "cmd quit"}; !slices.Equal(got, want) {
		t.Errorf("fake saw %q, want %q", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	long := "/" + strings.Repeat("r", 60) + "/mps"
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"relative root", Config{Root: "mps", GPUs: []string{gpuA}}, "root: must be an absolute path"},
		{"no GPUs", Config{Root: "/run/mps"}, "gpus: must list at least one"},
		{"bad UUID", Config{Root: "/run/mps", GPUs: []string{"../etc"}}, `gpus[0]: must be 1-64 characters of [A-Za-z0-9-], got "../etc"`},
		{"duplicate", Config{Root: "/run/mps", GPUs: []string{gpuA, gpuA}}, "gpus[1]: " + gpuA + " listed twice"},
		{"long root", Config{Root: long, GPUs: []string{gpuA}}, "use a shorter root"},
		{"backoff", Config{Root: "/run/mps", GPUs: []string{gpuA}, MinBackoff: time.Minute, MaxBackoff: time.Second}, "maxBackoff: must be at least minBackoff"},
		{"negative", Config{Root: "/run/mps", GPUs: []string{gpuA}, CheckEvery: -1}, "must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	s, err := New(Config{Root: "/run/tessera/mps", GPUs: []string{gpuA}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Has(gpuA) || s.Has(gpuB) || s.PipeDir(gpuA) != "/run/tessera/mps/"+gpuA+"/pipe" || s.LogDir(gpuA) != "/run/tessera/mps/"+gpuA+"/log" {
		t.Errorf("paths: %s %s", s.PipeDir(gpuA), s.LogDir(gpuA))
	}
}
