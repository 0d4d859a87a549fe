package hostd

import (
	"strings"
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// countingPolicy counts what a policy is told and asked.
type countingPolicy struct {
	placement.Policy
	mu              sync.Mutex
	observed, asked int
}

func (c *countingPolicy) Observe(p *placement.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed++
	if o, ok := c.Policy.(placement.Observer); ok {
		o.Observe(p)
	}
}

func (c *countingPolicy) Place(cl *placement.Cluster, p *placement.Pod) (placement.Decision, error) {
	c.mu.Lock()
	c.asked++
	c.mu.Unlock()
	return c.Policy.Place(cl, p)
}

func (c *countingPolicy) counts() (observed, asked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.observed, c.asked
}

// TestEachJobArrivesOnce: the policy learns from each submitted job once,
// however often the waiting job is placed again or the queue is read.
func TestEachJobArrivesOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "1xH200")
	cfg.DisablePreemption = true
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol := &countingPolicy{Policy: d.policy}
	d.policy = pol
	td := runDaemon(t, d)

	gates := t.TempDir()
	first, err := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "first job running", func() bool { return states(t, td)[first.ID] == api.Running })
	second, err := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := d.Queue(); err != nil {
			t.Fatal(err)
		}
		d.poke()
	}
	eventually(t, "the waiting job placed again", func() bool { _, asked := pol.counts(); return asked >= 4 })
	if observed, asked := pol.counts(); observed != 2 {
		t.Errorf("the policy was told of %d arrivals after %d placements and queue reads, want 2 (one per job)", observed, asked)
	}
	openGate(t, gates, first.ID, 0)
	openGate(t, gates, second.ID, 0)
	if _, err := d.Wait(t.Context(), second.ID); err != nil {
		t.Fatal(err)
	}
	if observed, _ := pol.counts(); observed != 2 {
		t.Errorf("after both jobs ran the policy was told of %d arrivals, want 2", observed)
	}
}

// TestQueueLimitHoldsJobs: a configured queue's hard limit (documented in
// docs/host.md) holds its next job while the GPUs are free, and tessera
// queue says so in this host's words; the job starts once the queue's
// running job ends.
func TestQueueLimitHoldsJobs(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "2xH200", withQueues(queueing.Queue{Name: "capped", Limit: queueing.Resources{GPUMilli: 1000}}))
	job := func() api.SubmitRequest {
		r := gatedJob(gates, map[string]string{"count": "1"}, 0)
		r.Queue = "capped"
		return r
	}
	first, err := d.Submit(job())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "first job running", func() bool { return states(t, d)[first.ID] == api.Running })
	second, err := d.Submit(job())
	if err != nil {
		t.Fatal(err)
	}
	d.schedule() // one pass, here: the job would start now if nothing held it
	q, err := d.Queue()
	if err != nil || len(q) != 1 || q[0].ID != second.ID {
		t.Fatalf("queue = %+v, %v", q, err)
	}
	want := "waiting for queue capped's limit: its jobs use 1 GPU of its limit 1, and this job needs 1 more"
	if !strings.Contains(q[0].Reason, want) {
		t.Errorf("reason %q, want it to contain %q", q[0].Reason, want)
	}
	if s := states(t, d)[second.ID]; s != api.Queued {
		t.Fatalf("second job %s with a GPU free: the queue's limit is 1 GPU", s)
	}
	openGate(t, gates, first.ID, 0)
	eventually(t, "second job running once the first ended", func() bool { return states(t, d)[second.ID] == api.Running })
	openGate(t, gates, second.ID, 0)
	if _, err := d.Wait(t.Context(), second.ID); err != nil {
		t.Fatal(err)
	}
}
