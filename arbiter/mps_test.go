package arbiter

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
	"github.com/tessera-gpu/tessera/binding"
)

// mpsArbiter returns a ModeMPS arbiter over the fake control program; every
// wait of the daemons' supervisor is reported on waiting and never ends.
func mpsArbiter(t *testing.T, gpus ...string) (*Arbiter, *fakeClock, chan struct{}) {
	t.Helper()
	waiting := make(chan struct{}, 100)
	a, clock := newArbiter(t, Config{Mode: ModeMPS, MPS: mps.Config{
		Binary: mpstest.Write(t), Root: mpstest.ShortDir(t), GPUs: gpus,
		Env: []string{"PATH=" + os.Getenv("PATH"), "FAKE_INHERITED=yes"},
		After: func(time.Duration) <-chan time.Time {
			waiting <- struct{}{}
			return nil
		},
	}})
	return a, clock, waiting
}

func TestMPSModeRegistersUngatedSingleGPUClients(t *testing.T) {
	a, clock, _ := mpsArbiter(t, "G0", "G1")
	if a.Mode() != ModeMPS || a.Mode().String() != "mps" || a.MPS() == nil {
		t.Fatalf("mode %v, supervisor %v", a.Mode(), a.MPS())
	}
	share := binding.Share{UUID: "G0", ComputeMilli: 200, ComputeLimitMilli: 450, MemoryMiB: 1024, MemoryLimitMiB: 2048}
	_, lib := register(t, a, "a", share)
	if got := lib.tokens(0); got != ungated {
		t.Fatalf("initial balance = %d, want ungated (%d)", got, ungated)
	}
	cases := []struct {
		name string
		gpus []binding.Share
		want string
	}{
		{"two GPUs", []binding.Share{gpuShare("G0", 100, 100), gpuShare("G1", 100, 100)}, "gpus: MPS mode serves clients of one GPU"},
		{"GPU without a daemon", []binding.Share{gpuShare("G9", 100, 100)}, "gpus[0].uuid: no MPS daemon is configured for GPU G9"},
		{"overbooked", []binding.Share{gpuShare("G0", 900, 1000)}, "guarantees on GPU G0 would sum to 1100"},
	}
	for _, c := range cases {
		err := a.Register(context.Background(), Client{Key: "x", Dir: t.TempDir(), GPUs: c.gpus})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	// Launches are never gated: a balance run down is topped up.
	if got := lib.launch(0, 1000); got != 1000 {
		t.Fatalf("launched %d of 1000", got)
	}
	atomic.AddInt64((*int64)(lib.word(0, 0)), -ungated)
	before := lib.heartbeat()
	step(t, a, clock)
	if got := lib.tokens(0); got != ungated {
		t.Errorf("balance after a step = %d, want ungated again", got)
	}
	if lib.heartbeat() <= before {
		t.Errorf("heartbeat did not move")
	}
	snap := a.Snapshot()
	if len(snap) != 1 || snap[0].Phase != "mps" || snap[0].Share != 450 || snap[0].Demand != 0 {
		t.Errorf("snapshot = %+v, want phase mps, share 450 (the cap)", snap)
	}
	env, err := a.ClientEnv(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CUDA_MPS_PIPE_DIRECTORY":           a.MPS().PipeDir("G0"),
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "45",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=2048M",
	}
	if !maps.Equal(env, want) {
		t.Errorf("ClientEnv = %v, want %v", env, want)
	}
	if _, err := a.ClientEnv(context.Background(), "nobody"); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("unknown key: err = %v", err)
	}
}

func TestMPSModeRunSupervisesTheDaemons(t *testing.T) {
	a, _, waiting := mpsArbiter(t, "G0", "G1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for range 2 { // each daemon started, answered, and is waiting for its next check
		select {
		case <-waiting:
		case <-time.After(30 * time.Second):
			t.Fatal("the MPS daemons did not start")
		}
	}
	sup := a.MPS()
	for _, u := range []string{"G0", "G1"} {
		want := []string{"start visible=" + u + " pipe=" + sup.PipeDir(u) + " log=" + sup.LogDir(u) + " inherited=yes"}
		if got := mpstest.Log(t, sup.LogDir(u)); !slices.Equal(got, want) {
			t.Errorf("%s: fake saw %q, want %q", u, got, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	// Run returns only after every daemon was told to quit.
	for _, u := range []string{"G0", "G1"} {
		got := mpstest.Log(t, sup.LogDir(u))
		if len(got) != 2 || got[1] != "cmd quit" || mpstest.Running(sup.PipeDir(u)) {
			t.Errorf("%s: fake saw %q, want start then quit", u, got)
		}
	}
}

func TestTokenModeClientEnvIsEmpty(t *testing.T) {
	a, _ := newArbiter(t, Config{})
	register(t, a, "a", gpuShare("G0", 500, 1000))
	env, err := a.ClientEnv(context.Background(), "a")
	if err != nil || env == nil || len(env) != 0 {
		t.Fatalf("ClientEnv = %v, %v; want empty", env, err)
	}
	if a.MPS() != nil || a.Mode().String() != "tokens" {
		t.Fatalf("token mode has a supervisor or is named %q", a.Mode())
	}
}
