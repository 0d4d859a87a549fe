package hostd

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// On simulated GPUs each job's use is its declared load (TESSERA_SIM_LOAD),
// labelled simulated, never measured, beside its booking; a job whose use
// stays below the idle threshold for the idle time is an idle holder from
// the end of the window that completes that time, not a window before.
func TestStatusUseSimulatedAndIdle(t *testing.T) {
	dir := t.TempDir() // before the arbiter, so it is removed after the arbiter closed
	t0, clock, jobs, arb := simArbiter(t)
	d := startDaemon(t, dir, "1xH200", func(c *Config) {
		c.Arbiter = ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}}
		c.Now = clock.Now
	})
	jobs.Set(d.Daemon)

	// busy: 0.6 of the GPU for 30 s, then idle for 5 min; quiet declares nothing.
	busy, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.5", "memory": "4Gi"}, Command: []string{"/bin/sleep", "3600"},
		Env: []string{"TESSERA_SIM_LOAD=busy=0.6,on=30s,off=5m,memory=2Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both jobs running", func() bool {
		return job(t, d, busy.ID).State == api.Running && job(t, d, quiet.ID).State == api.Running
	})
	// The jobs run until stopped (a daemon's shutdown leaves them running).
	t.Cleanup(func() {
		for _, id := range []string{busy.ID, quiet.ID} {
			if _, err := d.Stop(id); err != nil {
				t.Error(err)
			}
			if _, err := d.Wait(context.Background(), id); err != nil {
				t.Error(err)
			}
		}
	})
	if _, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/true"}, Env: []string{"TESSERA_SIM_LOAD=busy=2"}}); err == nil {
		t.Error("a load of 2 GPUs was accepted; want it refused at submission")
	}

	ctx := context.Background()
	share := func(st api.Status, id string) gpuuse.Share {
		t.Helper()
		for _, s := range st.GPUs[0].Shares {
			if s.Workload == id {
				return s
			}
		}
		t.Fatalf("no share of %s in %+v", id, st.GPUs[0])
		return gpuuse.Share{}
	}
	// stepTo runs the arbiter once per second up to t0+at.
	stepTo := func(at time.Duration) api.Status {
		t.Helper()
		for clock.Now().Before(t0.Add(at)) {
			clock.Step(time.Second)
			if err := arb.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		st, err := d.StatusUse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	st := stepTo(5 * time.Second)
	if s := share(st, busy.ID); s.Use.Source != gpuuse.None || s.Use.BusyMilli != nil {
		t.Errorf("before the first window: %+v, want no figure yet", s.Use)
	}
	// The first reading starts the meter at 1 s; the window [1 s, 11 s] closes at 11 s.
	st = stepTo(11 * time.Second)
	b := share(st, busy.ID)
	if b.Use.Source != gpuuse.Simulated || b.Use.BusyMilli == nil || *b.Use.BusyMilli != 600 || b.Use.MemoryUsedMiB == nil || *b.Use.MemoryUsedMiB != 2048 || !b.Use.At.Equal(t0.Add(11*time.Second)) {
		t.Errorf("busy job's use at 11 s: %+v, want simulated 0.6 of the GPU and 2Gi", b.Use)
	}
	if b.Booked != (gpuuse.Booked{GuaranteedMilli: 500, LimitMilli: 500, MemoryMiB: 4096, MemoryLimitMiB: 4096}) {
		t.Errorf("busy job's booking %+v, want 0.5 GPU and 4Gi", b.Booked)
	}
	if q := share(st, quiet.ID); q.Use.Source != gpuuse.Simulated || *q.Use.BusyMilli != 0 || *q.Use.MemoryUsedMiB != 0 {
		t.Errorf("quiet job's use %+v, want simulated 0 (it declares no load)", q.Use)
	}
	if g := st.GPUs[0]; g.Use == nil || g.Use.Source != gpuuse.Simulated || *g.Use.BusyMilli != 600 {
		t.Errorf("GPU use %+v, want the jobs' sum, simulated", g.Use)
	}
	if st.Use == nil || st.Use.IdleAfterSeconds != 60 || st.Use.IdleBelowMilli != 50 || st.Use.WindowSeconds != 10 {
		t.Errorf("status use rule %+v", st.Use)
	}

	// quiet is below the threshold from 1 s: idle at the window ending at 61 s.
	if q := share(stepTo(51*time.Second), quiet.ID); q.Idle != nil {
		t.Errorf("quiet job idle at 51 s: %+v", q.Idle)
	}
	if q := share(stepTo(61*time.Second), quiet.ID); q.Idle == nil || !q.Idle.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("quiet job at 61 s: idle %+v, want idle since 1 s", q.Idle)
	}
	// busy goes quiet at 30 s; its first quiet window starts at 31 s.
	st = stepTo(81 * time.Second)
	if b := share(st, busy.ID); b.Idle != nil || *b.Use.BusyMilli != 0 {
		t.Errorf("busy job at 81 s: %+v idle %+v, want quiet and not idle yet", b.Use, b.Idle)
	}
	st = stepTo(91 * time.Second)
	if b := share(st, busy.ID); b.Idle == nil || !b.Idle.Since.Equal(t0.Add(31*time.Second)) {
		t.Errorf("busy job at 91 s: idle %+v, want idle since 31 s", b.Idle)
	}
	for _, s := range st.GPUs[0].Shares {
		if s.Use.Source == gpuuse.Measured {
			t.Errorf("share %+v labelled measured on simulated GPUs", s)
		}
	}
}

// simArbiter is a node arbiter on a step clock (from t0) with the
// simulated meter over jobs: 1 s periods, 10 s use windows, idle below
// 0.05 of a GPU for a minute. The caller gives jobs its daemon.
func simArbiter(t *testing.T) (time.Time, *clocktesting.FakeClock, *JobTree, *arbiter.Arbiter) {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(t0) // the daemon's, the arbiter's and the simulated meter's
	jobs := &JobTree{Now: clock.Now}
	var mono uint64
	arb, err := arbiter.New(arbiter.Config{
		Clock: clock, Mono: func() (uint64, error) { mono += uint64(time.Second); return mono, nil },
		Period: time.Second, StaleAfter: time.Hour, UseWindow: 10 * time.Second,
		Idle:  gpuuse.IdleRule{BelowMilli: 50, After: time.Minute},
		Meter: &SimMeter{Jobs: jobs, Now: clock.Now}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arb.Close(context.Background()) })
	return t0, clock, jobs, arb
}
