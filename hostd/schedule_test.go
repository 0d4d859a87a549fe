package hostd

import (
	"slices"
	"testing"
	"time"

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
