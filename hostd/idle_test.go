package hostd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// A job of a queue that reclaims idle holders after 30 minutes, idle on
// the simulated meter from 1 s (marked at 61 s), holds the only GPU; a job
// of another queue, of no higher priority, waits. The idle one is not
// stopped at 30 min 0 s (idle 29 min 59 s) and is stopped at 30 min 1 s,
// as kind idle, saying why.
func TestIdleHolderReclaimed(t *testing.T) {
	dir := t.TempDir() // before the arbiter, so it is removed after the arbiter closed
	t0, clock, jobs, arb := simArbiter(t)
	settings, err := ParseConfig([]byte("queues:\n  - name: notebooks\n    idleReclaimAfter: 30m\n  - name: batch\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir, "1xH200", func(c *Config) {
		c.Arbiter = ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}}
		c.Now = clock.Now
		c.Queues = settings.Queues
	})
	jobs.Set(d.Daemon)
	qs, err := d.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if want := map[string]int64{"notebooks": 1800}[q.Name]; q.IdleReclaimAfterSeconds != want {
			t.Errorf("queue %s: idleReclaimAfterSeconds %d, want %d", q.Name, q.IdleReclaimAfterSeconds, want)
		}
	}

	nb := submit(t, d, inQueue("notebooks", api.SubmitRequest{GPU: map[string]string{"compute": "1"}, Command: []string{"/bin/sleep", "3600"}, Priority: 5}))
	eventually(t, "the notebook running", func() bool { return job(t, d, nb.ID).State == api.Running })
	p := submit(t, d, inQueue("batch", api.SubmitRequest{GPU: map[string]string{"compute": "0.5"}, Command: []string{"/bin/true"}}))
	t.Cleanup(func() {
		if _, err := d.Stop(nb.ID); err != nil && !strings.Contains(err.Error(), "ended") {
			t.Log(err)
		}
		for _, id := range []string{nb.ID, p.ID} { // p starts once nb is gone
			if _, err := d.Wait(context.Background(), id); err != nil {
				t.Error(err)
			}
		}
	})

	ctx := context.Background()
	stepTo := func(at time.Duration) {
		t.Helper()
		for clock.Now().Before(t0.Add(at)) {
			clock.Step(time.Second)
			if err := arb.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		d.schedule() // a pass on the marks as they stand (the loop runs its own too)
	}
	stepTo(61 * time.Second)
	st, err := d.StatusUse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.GPUs[0].Shares; len(s) != 1 || s[0].Idle == nil || !s[0].Idle.Since.Equal(t0.Add(time.Second)) {
		t.Fatalf("shares at 61 s %+v: want the notebook idle since 1 s", s)
	}
	stepTo(30 * time.Minute)
	if j := job(t, d, nb.ID); j.Preempt != nil || j.State != api.Running {
		t.Fatalf("notebook idle 29 min 59 s: state %s, preempt %+v; want it left running", j.State, j.Preempt)
	}
	if j := job(t, d, p.ID); j.State != api.Queued {
		t.Fatalf("batch job %s before the reclaim, want queued", j.State)
	}
	stepTo(30*time.Minute + time.Second)
	j := job(t, d, nb.ID)
	if j.Preempt == nil && j.LastPreemption != nil {
		j.Preempt = j.LastPreemption
	}
	if j.Preempt == nil || j.Preempt.Kind != "idle" || j.Preempt.By != p.ID || !strings.Contains(j.Preempt.Reason, "idleReclaimAfter 30m0s") {
		t.Fatalf("notebook idle 30 min: preempt %+v; want stopped for %s as idle", j.Preempt, p.ID)
	}
	if j, err := d.Wait(ctx, p.ID); err != nil || j.State != api.Succeeded {
		t.Fatalf("batch job after the reclaim: %s, %v; want it run", j.State, err)
	}
}
