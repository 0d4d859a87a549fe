package usepub

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

type fakeSink struct {
	mu   sync.Mutex
	err  error
	sent []time.Time
}

func (s *fakeSink) Publish(_ context.Context, st nodeuse.Status) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.sent = append(s.sent, st.At)
	return nil
}

func (s *fakeSink) times() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, at := range s.sent {
		out = append(out, at.Sub(t0))
	}
	return out
}

// Run on an injected clock: the first publication at once, the next a
// period later; a sink that keeps failing is warned about once, tried
// again every gap, and the recovery said.
func TestLoopRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := &fakeSink{}
	steps := make(chan time.Time)
	var logs bytes.Buffer
	l := &Loop{
		Records: func(now time.Time) nodeuse.Status { steps <- now; return nodeuse.Status{At: now} },
		Sink:    sink, Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Pacer: gpuuse.Pacer{Period: 10 * time.Second, Gap: 3 * time.Second},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	<-steps // the first step, at start
	tick := func(n int) {
		for range n {
			for !clk.HasWaiters() { // the loop waits on its ticker again
				time.Sleep(time.Millisecond)
			}
			clk.Step(time.Second)
			<-steps
		}
	}
	tick(10)
	sink.mu.Lock()
	sink.err = errors.New("the server could not find the requested resource")
	sink.mu.Unlock()
	tick(19) // fails at 20 s, tries again at 23, 26, 29 s
	sink.mu.Lock()
	sink.err = nil
	sink.mu.Unlock()
	tick(3) // 32 s: published
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	go func() { // a tick racing the cancel may step once more
		for range steps {
		}
	}()
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(steps)
	want := []time.Duration{0, 10 * time.Second, 32 * time.Second}
	if got := sink.times(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("published at %v, want %v", got, want)
	}
	if n := strings.Count(logs.String(), "GPU use not published"); n != 1 {
		t.Errorf("%d warnings for one lasting failure, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "GPU use published again") {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
}
