package hostd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/placement"
)

// benchDaemon is a daemon on simulated GPUs whose supervisor is /bin/true
// (it exits at once without running anything), so the benchmarks time the
// daemon's own work: validation, placement, records and bookkeeping.
func benchDaemon(b *testing.B, spec string, run bool) *Daemon {
	b.Helper()
	cat := catalog.Default()
	src, err := discovery.Open("sim:"+spec, cat)
	if err != nil {
		b.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(Config{
		StateDir: b.TempDir(), Source: src.Name(), Simulated: true, Nodes: nodes, Catalog: cat,
		Supervisor: []string{"/bin/true"}, PollInterval: 5 * time.Millisecond, DisablePreemption: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { defer close(done); _ = d.Run(ctx) }()
	} else {
		close(done)
	}
	b.Cleanup(func() { cancel(); <-done; _ = d.Close() })
	return d
}

func benchJob(compute string) api.SubmitRequest {
	return api.SubmitRequest{GPU: map[string]string{"compute": compute}, Command: []string{"/bin/true"}}
}

// BenchmarkSchedulePass times one scheduling pass over a queue of 200
// jobs whose head does not fit (the pass a daemon makes on every change
// while the host is full): list, order, place the head, give up.
func BenchmarkSchedulePass(b *testing.B) {
	d := benchDaemon(b, "8xH200", false)
	// Book all eight GPUs as running jobs would (no processes to start).
	whole, err := d.validate(benchJob("1"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		whole.ID = fmt.Sprintf("running-%d", i)
		if err := d.bookLocked(whole, placement.Decision{Node: 0, GPUs: []int{i}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		if _, err := d.Submit(benchJob(fmt.Sprint([]string{"0.25", "0.5", "1"}[i%3]))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.schedule()
	}
}

// BenchmarkSubmitQueued times a submission that stays queued: validation,
// the "can this ever fit" probe, and the durable record.
func BenchmarkSubmitQueued(b *testing.B) {
	d := benchDaemon(b, "1xH200", false) // not scheduling: every job stays queued
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Submit(benchJob("0.5")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJobLifecycle times b.N jobs from submission to their recorded
// end, eight at a time on 8xH200 (the supervisor exits at once): the
// whole path a job takes through the daemon.
func BenchmarkJobLifecycle(b *testing.B) {
	d := benchDaemon(b, "8xH200", true)
	ids := make([]string, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, err := d.Submit(benchJob("1"))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		for {
			j, err := d.Job(id)
			if err != nil {
				b.Fatal(err)
			}
			if j.State.Final() {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
}
