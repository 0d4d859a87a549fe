package hostd

import (
	"slices"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// TestRestartKeepsQueueOrder: the scheduling core is rebuilt from the
// store when the daemon starts, so a restart changes neither the queue's
// order nor its reasons, and the jobs then start in that order.
func TestRestartKeepsQueueOrder(t *testing.T) {
	gates, state := t.TempDir(), t.TempDir()
	noPreempt := func(c *Config) { c.DisablePreemption = true }
	d := startDaemon(t, state, "1xH200", noPreempt)
	whole := map[string]string{"count": "1"}
	run := submit(t, d, gatedJob(gates, whole, 0))
	eventually(t, "the first job running", func() bool { return started(t, d, run.ID) })
	x := submit(t, d, gatedJob(gates, whole, 0))
	y := submit(t, d, gatedJob(gates, whole, 5))
	z := submit(t, d, inQueue("batch", gatedJob(gates, whole, 0)))
	w := submit(t, d, gatedJob(gates, whole, 0))
	// Queue batch uses nothing (and sorts first when both use nothing), so
	// its job goes first; then the default queue's by priority, then
	// submission.
	want := []string{z.ID, y.ID, x.ID, w.ID}
	before := queueEntries(t, d)
	if ids := entryIDs(before); !slices.Equal(ids, want) {
		t.Fatalf("queue before the restart = %v, want %v", ids, want)
	}
	d.shutdown()

	d2 := startDaemon(t, state, "1xH200", noPreempt)
	if after := queueEntries(t, d2); !slices.Equal(after, before) {
		t.Fatalf("queue after the restart:\n%+v\nwant\n%+v", after, before)
	}
	prev := run.ID
	for i, id := range want {
		openGate(t, gates, prev, 0)
		eventually(t, id+" running", func() bool { return states(t, d2)[id] == api.Running })
		s := states(t, d2)
		for _, rest := range want[i+1:] {
			if s[rest] != api.Queued {
				t.Fatalf("%s is %s while %s starts: jobs must start in the queue's order %v", rest, s[rest], id, want)
			}
		}
		prev = id
	}
	openGate(t, gates, prev, 0)
	drain(t, d2, gates)
}

func queueEntries(t *testing.T, d *testDaemon) []api.QueueEntry {
	t.Helper()
	q, err := d.Queue()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func entryIDs(q []api.QueueEntry) []string {
	var out []string
	for _, e := range q {
		out = append(out, e.ID)
	}
	return out
}

// TestAging: a waiting job's priority rises by one for every AgingStep it
// has waited (a minute by default), so an old low-priority job goes before
// a newer high-priority one; a negative AgingStep turns aging off.
func TestAging(t *testing.T) {
	for _, tc := range []struct {
		name  string
		aging time.Duration
		first int // index of the job expected first: 0 low, 1 high
	}{
		{"default step", 0, 0},
		{"no aging", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gates, clk := t.TempDir(), newClock()
			d := startDaemon(t, t.TempDir(), "1xH200", withClock(clk), func(c *Config) { c.DisablePreemption, c.AgingStep = true, tc.aging })
			whole := map[string]string{"count": "1"}
			run := submit(t, d, gatedJob(gates, whole, 0))
			eventually(t, "the first job running", func() bool { return started(t, d, run.ID) })
			low := submit(t, d, gatedJob(gates, whole, 0))
			clk.advance(time.Hour) // low's priority ages to 60
			high := submit(t, d, gatedJob(gates, whole, 10))
			want := [][]string{{low.ID, high.ID}, {high.ID, low.ID}}[tc.first]
			if got := entryIDs(queueEntries(t, d)); !slices.Equal(got, want) {
				t.Errorf("queue order %v, want %v", got, want)
			}
			drain(t, d, gates)
		})
	}
}

// TestItemOf: the core orders a job by priority then Seq (no arrival
// time), ages it from its submission or its re-queueing, and serves a job
// recorded in a queue the tree rejects (an older record's name) in the
// default queue instead of holding up the host.
func TestItemOf(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	requeued := at.Add(time.Hour)
	for _, tc := range []struct {
		job       api.Job
		queue     string
		waitsFrom time.Time
	}{
		{api.Job{ID: "a", Queue: "my_queue", Submitted: at}, "default", at},
		{api.Job{ID: "b", Submitted: at}, "default", at},
		{api.Job{ID: "c", Queue: "research", Submitted: at, Requeued: &requeued}, "research", requeued},
	} {
		it := itemOf(tc.job)
		if it.Queue != tc.queue || !it.Since.Equal(tc.waitsFrom) || !it.Arrived.IsZero() {
			t.Errorf("%s: item %+v, want queue %s, waiting since %v, ordered by priority then Seq alone", tc.job.ID, it, tc.queue, tc.waitsFrom)
		}
	}
}

// TestQueueIsTheLastPass: `tessera queue` says what the daemon's own core
// decided in its last pass, not what a cycle of its own would: its order
// is the pass's, its head's reason the pass's Wait; a job submitted since
// makes the answer run the pass (or, while Run's loop is not running,
// is listed last, unconsidered); time alone (which ends a running job's
// protection by the minimum runtime) changes nothing until a pass has run.
func TestQueueIsTheLastPass(t *testing.T) {
	gates, clk := t.TempDir(), newClock()
	cfg := testConfig(t, t.TempDir(), "1xH200")
	cfg.Now, cfg.PreemptionMinRuntime = clk.now, time.Hour
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	td := &testDaemon{Daemon: d} // no Run loop: the test runs each pass
	whole := map[string]string{"count": "1"}
	run := submit(t, td, gatedJob(gates, whole, 0))
	d.schedule()
	if s := states(t, td)[run.ID]; s != api.Running {
		t.Fatalf("the first job is %s after a pass, want running", s)
	}
	low := submit(t, td, gatedJob(gates, whole, 0))
	high := submit(t, td, gatedJob(gates, whole, 10))
	d.schedule()
	lastWaits := func() []dispatch.Wait {
		d.mu.Lock()
		defer d.mu.Unlock()
		return slices.Clone(d.last.ready.Waits)
	}
	protected := "waiting for GPU capacity: needs 1 whole GPU free (free now: 0 of 1); " + run.ID + " could be preempted once running for the minimum runtime (1h0m0s)"
	check := func(what string, want []string, headReason string) {
		t.Helper()
		q := queueEntries(t, td)
		waits := lastWaits()
		var waited []string
		for _, w := range waits {
			waited = append(waited, w.ID)
		}
		if got := entryIDs(q); !slices.Equal(got, want) || !slices.Equal(waited, want) {
			t.Fatalf("%s: queue %v, the pass's waits %v, want both %v", what, got, waited, want)
		}
		if waits[0].Status != cycle.NoFit || q[0].Reason != headReason {
			t.Errorf("%s: the pass's wait for the head %v, the queue's reason %q, want %q", what, waits[0].Status, q[0].Reason, headReason)
		}
		for i, w := range waits[1:] {
			if w.Status != cycle.Behind || q[i+1].Reason != "behind "+want[0]+" (jobs start in priority order, then submission order; no overtaking)" {
				t.Errorf("%s: the pass's wait for %s %v, the queue's reason %q", what, w.ID, w.Status, q[i+1].Reason)
			}
		}
	}
	check("after a pass", []string{high.ID, low.ID}, protected)

	// A daemon whose loop is not running runs no pass: the job submitted
	// since is listed last, unconsidered.
	urgent := submit(t, td, gatedJob(gates, whole, 1000))
	q := queueEntries(t, td)
	if got, want := entryIDs(q), []string{high.ID, low.ID, urgent.ID}; !slices.Equal(got, want) || q[2].Reason != "queued; not yet considered by a scheduling pass" {
		t.Fatalf("a submission to a daemon not running: queue %v, the new job's reason %q", got, q[2].Reason)
	}
	// While Run's loop runs, the pass the submission poked runs first.
	setLooping(d, true)
	check("after a submission", []string{urgent.ID, high.ID, low.ID}, protected)

	clk.advance(2 * time.Hour) // the minimum runtime no longer protects run
	check("after time alone", []string{urgent.ID, high.ID, low.ID}, protected)
	d.schedule()
	check("after the next pass", []string{urgent.ID, high.ID, low.ID},
		"waiting for GPU capacity: needs 1 whole GPU free (free now: 0 of 1); preempting "+run.ID+"; starts once they exit")
	setLooping(d, false) // Run sets it again
	drain(t, runDaemon(t, d), gates)
}

// setLooping says, as Run does, whether its loop runs the passes: the
// test runs each pass itself, so that time alone runs none.
func setLooping(d *Daemon, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.looping = on
}

// TestPassWaiting: the pass's answer lists what it placed, then what
// waits in the order it served them, then what it left out, and last the
// queued jobs it never saw, in submission order; jobs no longer queued
// are left out.
func TestPassWaiting(t *testing.T) {
	queued := map[string]api.Job{}
	for i, id := range []string{"placed", "first", "second", "backoff", "new-a", "new-b"} {
		queued[id] = api.Job{ID: id, Seq: uint64(10 - i)}
	}
	p := pass{ready: dispatch.Ready{
		Binds: []dispatch.Bind{{ID: "placed"}, {ID: "started"}},
		Waits: []dispatch.Wait{{ID: "first"}, {ID: "gone"}, {ID: "second"}},
		Order: []string{"second", "backoff", "first"},
	}}
	order, considered, waits := p.waiting(queued)
	var ids []string
	for _, j := range order {
		ids = append(ids, j.ID)
	}
	if want := []string{"placed", "first", "second", "backoff", "new-b", "new-a"}; !slices.Equal(ids, want) || considered != 4 {
		t.Errorf("order %v (considered %d), want %v (considered 4)", ids, considered, want)
	}
	if _, ok := waits["second"]; !ok || len(waits) != 3 {
		t.Errorf("waits %v", waits)
	}
}
