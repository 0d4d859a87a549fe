package arbiter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/demand"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
)

func newArbiter(t *testing.T, cfg Config) (*Arbiter, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	cfg.Clock, cfg.Mono, cfg.Logger = clock, fakeMono(), quiet()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, clock
}

func register(t *testing.T, a *Arbiter, key string, gpus ...binding.Share) (string, *fakeLib) {
	t.Helper()
	dir := t.TempDir()
	if err := a.Register(context.Background(), Client{Key: key, Dir: dir, GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
	return dir, attach(t, dir)
}

func step(t *testing.T, a *Arbiter, c *fakeClock) {
	t.Helper()
	c.Advance(a.cfg.Period)
	if err := a.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"period above staleAfter/4", Config{Period: time.Second}, "period: must be in [1ms, staleAfter/4 = 500ms]"},
		{"stale not whole ms", Config{StaleAfter: 1500 * time.Microsecond}, "staleAfter: must be whole milliseconds in [4ms, 1h]"},
		{"burst periods", Config{BurstPeriods: 101}, "burstPeriods: must be in [1, 100], got 101"},
		{"meter window below the period", Config{MeterWindow: 10 * time.Millisecond}, "meterWindow: must be in [period = 50ms, 1m], got 10ms"},
		{"meter window above a minute", Config{MeterWindow: 2 * time.Minute}, "meterWindow: must be in [period = 50ms, 1m], got 2m0s"},
		{"use window below the meter window", Config{UseWindow: 500 * time.Millisecond}, "useWindow: must be in [meterWindow = 1s, 1m], got 500ms"},
		{"idle time below a minute", Config{Idle: gpuuse.IdleRule{After: 30 * time.Second}}, "idle.after: must be in [1m0s, 168h0m0s], got 30s"},
		{"quantum", Config{Quantum: time.Microsecond}, "quantum: must be in [1ms, 1h]"},
		{"rate", Config{Rate: rateGain(3)}, "rate: gain: must be in (0, 1], got 3"},
		{"demand", Config{Demand: demand.Config{Headroom: 9}}, "demand: headroom: must be in [1, 4], got 9"},
		{"unknown mode", Config{Mode: 7}, "mode: must be ModeTokens or ModeMPS, got 7"},
		{"MPS without a root", Config{Mode: ModeMPS}, "mps: root: must be an absolute path"},
		{"MPS without GPUs", Config{Mode: ModeMPS, MPS: mps.Config{Root: "/run/mps"}}, "mps: gpus: must list at least one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestRegisterValidates(t *testing.T) {
	a, _ := newArbiter(t, Config{})
	register(t, a, "taken", gpuShare("G", 600, 1000))
	dir := t.TempDir()
	ok := gpuShare("H", 100, 200)
	cases := []struct {
		name string
		c    Client
		want string
	}{
		{"empty key", Client{Dir: dir, GPUs: []binding.Share{ok}}, "key: must be 1-128 characters"},
		{"bad key", Client{Key: "-x", Dir: dir, GPUs: []binding.Share{ok}}, "key: must be 1-128 characters"},
		{"relative dir", Client{Key: "k", Dir: "run/k", GPUs: []binding.Share{ok}}, "dir: must be an absolute path"},
		{"no GPUs", Client{Key: "k", Dir: dir}, "gpus: must list 1 to 16 GPUs, got 0"},
		{"GPU twice", Client{Key: "k", Dir: dir, GPUs: []binding.Share{ok, ok}}, "gpus[1].uuid: H listed twice"},
		{"zero compute", Client{Key: "k", Dir: dir, GPUs: []binding.Share{gpuShare("H", 0, 10)}}, "gpus[0].compute: must be in [1, 1000], got 0"},
		{"limit below guarantee", Client{Key: "k", Dir: dir, GPUs: []binding.Share{gpuShare("H", 100, 50)}}, "gpus[0].computeLimit: must be in [100, 1000], got 50"},
		{"oversold GPU", Client{Key: "k", Dir: dir, GPUs: []binding.Share{gpuShare("G", 500, 1000)}}, "guarantees on GPU G would sum to 1100"},
		{"key taken", Client{Key: "taken", Dir: dir, GPUs: []binding.Share{ok}}, "key: taken is already registered"},
		{"missing dir", Client{Key: "k", Dir: filepath.Join(dir, "absent"), GPUs: []binding.Share{ok}}, "grant region"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := a.Register(context.Background(), c.c)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	if err := a.Unregister(context.Background(), "nobody"); !errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), "key: nobody: not registered") {
		t.Fatalf("unregister unknown: %v", err)
	}
}

func TestRegisterPublishesAGuaranteeCushion(t *testing.T) {
	a, _ := newArbiter(t, Config{})
	dir, lib := register(t, a, "c1", gpuShare("G", 300, 1000), gpuShare("H", 100, 100))
	st, err := os.Stat(filepath.Join(dir, RegionFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o666 {
		t.Fatalf("region mode %v, want 0666", st.Mode().Perm())
	}
	// One period (50 ms) at the static 20 000 launches/s: 300 and 100 thousandths.
	if t0, t1 := lib.tokens(0), lib.tokens(1); t0 != 300 || t1 != 100 {
		t.Fatalf("initial tokens %d/%d, want 300/100", t0, t1)
	}
}

// TestWorkConservingSplit drives two clients of one GPU through busy,
// idle and busy again.
func TestWorkConservingSplit(t *testing.T) {
	a, clock := newArbiter(t, Config{})
	_, la := register(t, a, "a", gpuShare("G", 300, 1000))
	_, lb := register(t, a, "b", gpuShare("G", 100, 1000))
	phases := []struct {
		name         string
		aBusy, bBusy bool
		want         map[string]int64
	}{
		{"both busy: split 3:1", true, true, map[string]int64{"a": 750, "b": 250}},
		{"b idle: a takes the GPU", true, false, map[string]int64{"a": 1000, "b": 0}},
		{"b back: 3:1 again", true, true, map[string]int64{"a": 750, "b": 250}},
		{"a idle: b takes the GPU", false, true, map[string]int64{"a": 0, "b": 1000}},
	}
	for _, p := range phases {
		for range 3 {
			for _, c := range []struct {
				busy bool
				lib  *fakeLib
			}{{p.aBusy, la}, {p.bBusy, lb}} {
				if c.busy {
					c.lib.launch(0, 1<<40)
				} else {
					c.lib.rest(0)
				}
			}
			step(t, a, clock)
		}
		got := shares(a, "G")
		if got["a"] != p.want["a"] || got["b"] != p.want["b"] {
			t.Fatalf("%s: shares %v, want %v", p.name, got, p.want)
		}
		// A busy client's balance is one period of its share (static rate).
		if p.aBusy && la.tokens(0) != p.want["a"] {
			t.Fatalf("%s: a holds %d tokens, want %d", p.name, la.tokens(0), p.want["a"])
		}
	}
}

// TestIdleReclaim checks that an idle client keeps its burst cushion for
// IdleAfter and then only its guarantee.
func TestIdleReclaim(t *testing.T) {
	a, clock := newArbiter(t, Config{Demand: demand.Config{IdleAfter: time.Second}})
	_, l := register(t, a, "a", gpuShare("G", 200, 800))
	l.launch(0, 1<<40)
	step(t, a, clock)
	if got := l.tokens(0); got != 800 {
		t.Fatalf("busy: %d tokens, want 800 (its limit for one period)", got)
	}
	l.rest(0)
	step(t, a, clock)
	if got, st := l.tokens(0), a.Snapshot()[0]; got != 800 || st.Phase != "idle" || st.Share != 0 {
		t.Fatalf("briefly idle: %d tokens, %+v; want the 800-token burst kept, share 0", got, st)
	}
	clock.Advance(time.Second)
	step(t, a, clock)
	if got, st := l.tokens(0), a.Snapshot()[0]; got != 200 || st.Phase != "reclaimed" {
		t.Fatalf("long idle: %d tokens, %+v; want the burst revoked down to the 200-token guarantee", got, st)
	}
	l.launch(0, 1<<40)
	step(t, a, clock)
	if got := l.tokens(0); got != 800 {
		t.Fatalf("awake: %d tokens, want 800", got)
	}
}

// TestAntiThrashing oversubscribes a GPU's memory (capacity 10 MiB) and
// checks exclusive slices, quantum rotation, early release and the return
// to sharing.
func TestAntiThrashing(t *testing.T) {
	const mib = 1 << 20
	a, clock := newArbiter(t, Config{Capacity: map[string]uint64{"G": 10 * mib}, Quantum: time.Second})
	da, la := register(t, a, "a", gpuShare("G", 500, 1000))
	db, lb := register(t, a, "b", gpuShare("G", 500, 1000))
	busy := func() { la.launch(0, 1<<40); lb.launch(0, 1<<40) }
	writeAcct(t, da, "a", 6*mib)
	writeAcct(t, db, "b", 6*mib)

	busy()
	step(t, a, clock)
	if got := shares(a, "G"); got["a"] != 1000 || got["b"] != 0 || lb.tokens(0) != 0 {
		t.Fatalf("oversubscribed: shares %v, b tokens %d; want a exclusive, b revoked", got, lb.tokens(0))
	}
	busy()
	clock.Advance(time.Second)
	step(t, a, clock)
	if got := shares(a, "G"); got["a"] != 0 || got["b"] != 1000 || la.tokens(0) != 0 {
		t.Fatalf("after the quantum: shares %v, a tokens %d; want b exclusive, a revoked", got, la.tokens(0))
	}
	la.launch(0, 1<<40)
	lb.rest(0)
	step(t, a, clock)
	if got := shares(a, "G"); got["a"] != 1000 || got["b"] != 0 {
		t.Fatalf("b idle: shares %v; want early release to a", got)
	}
	writeAcct(t, da, "a", 3*mib)
	busy()
	step(t, a, clock)
	if got, st := shares(a, "G"), a.Snapshot()[0]; got["a"] != 500 || got["b"] != 500 || st.Exclusive {
		t.Fatalf("fits again: shares %v, %+v; want shared 500/500", got, st)
	}
}

func TestUsage(t *testing.T) {
	a, _ := newArbiter(t, Config{})
	da, _ := register(t, a, "a", gpuShare("G", 100, 100), gpuShare("H", 100, 100))
	register(t, a, "b", gpuShare("G", 100, 100))
	writeAcct(t, da, "a", 5<<20, 7)
	got, err := a.Memory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a G 5242880", "a H 7", "b G 0"}
	if len(got) != len(want) {
		t.Fatalf("usage %v, want %v", got, want)
	}
	for i, u := range got {
		if s := u.Key + " " + u.GPU + " " + ftoa(float64(u.Bytes)); s != want[i] {
			t.Fatalf("usage[%d] = %q, want %q", i, s, want[i])
		}
	}
}

// TestRunHeartbeatsEveryPeriod runs the loop on the fake clock.
func TestRunHeartbeatsEveryPeriod(t *testing.T) {
	a, clock := newArbiter(t, Config{})
	_, l := register(t, a, "a", gpuShare("G", 100, 100))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var last uint64
	for i := range 3 {
		select {
		case <-clock.asked: // a step ran and the loop waits for the next period
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not wait for the clock")
		}
		hb := l.heartbeat()
		if hb <= last {
			t.Fatalf("step %d: heartbeat %d did not advance from %d", i, hb, last)
		}
		last = hb
		clock.Advance(a.cfg.Period)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestValidKey(t *testing.T) {
	cases := []struct {
		key  string
		want bool
	}{
		{"a", true}, {"ctr-1.x_y", true}, {"9abc", true}, {strings.Repeat("a", 128), true},
		{"", false}, {"-a", false}, {".a", false}, {"a/b", false}, {"a b", false}, {strings.Repeat("a", 129), false},
	}
	for _, c := range cases {
		if got := validKey(c.key); got != c.want {
			t.Errorf("validKey(%q) = %v, want %v", c.key, got, c.want)
		}
	}
}
