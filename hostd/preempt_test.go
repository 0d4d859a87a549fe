package hostd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/queueing"
)

// clock is a test clock that moves only when told to.
type clock struct {
	base time.Time
	off  atomic.Int64
}

func newClock() *clock                   { return &clock{base: time.Now()} }
func (c *clock) now() time.Time          { return c.base.Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }
func withClock(c *clock) func(*Config)   { return func(cfg *Config) { cfg.Now = c.now } }
func withMinRuntime(d time.Duration) func(*Config) {
	return func(cfg *Config) { cfg.PreemptionMinRuntime = d }
}

// started reports whether the job runs and has printed (so its supervisor
// is past setting up its signal handling).
func started(t *testing.T, d *testDaemon, id string) bool {
	t.Helper()
	if states(t, d)[id] != api.Running {
		return false
	}
	out, err := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
	return err == nil && len(out) > 0
}

// drain lets every job that has not ended finish and waits for it.
func drain(t *testing.T, d *testDaemon, gates string) {
	t.Helper()
	jobs, err := d.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if !j.State.Final() {
			openGate(t, gates, j.ID, 0)
		}
	}
	for _, j := range jobs {
		if _, err := d.Wait(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
	}
}

func job(t *testing.T, d *testDaemon, id string) api.Job {
	t.Helper()
	j, err := d.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func submit(t *testing.T, d *testDaemon, r api.SubmitRequest) api.Job {
	t.Helper()
	j, err := d.Submit(r)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func inQueue(q string, r api.SubmitRequest) api.SubmitRequest {
	r.Queue = q
	return r
}

func restartable(r api.SubmitRequest) api.SubmitRequest {
	r.Restartable = true
	return r
}

// A higher-priority job of the same queue stops a lower-priority one that
// is not restartable: it ends as preempted, saying by whom, and the
// higher-priority job starts. Equal priority never preempts, nor does a
// higher priority in another queue.
func TestPreemptByPriority(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH200")
	whole := map[string]string{"count": "1"}
	low := submit(t, d, gatedJob(gates, whole, 0))
	eventually(t, "low-priority job running", func() bool { return started(t, d, low.ID) })
	high := submit(t, d, gatedJob(gates, whole, 10))
	eventually(t, "high-priority job running", func() bool { return states(t, d)[high.ID] == api.Running })
	v, err := d.Wait(context.Background(), low.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != api.Preempted || v.LastPreemption == nil || v.LastPreemption.By != high.ID || v.LastPreemption.Kind != "priority" {
		t.Fatalf("victim: state %s, preemption %+v", v.State, v.LastPreemption)
	}
	if !strings.Contains(v.Reason, "preempted by "+high.ID+" (priority 10) of queue default; this job's priority is 0") {
		t.Errorf("victim reason %q", v.Reason)
	}
	if v.ExitCode == nil || *v.ExitCode != 128+15 {
		t.Errorf("victim exit code %v, want 143 (SIGTERM)", v.ExitCode)
	}
	// A peer of equal priority waits, and so does a higher priority of
	// another queue (without a guarantee to reclaim).
	eventually(t, "high-priority job printing", func() bool { return started(t, d, high.ID) })
	peer := submit(t, d, gatedJob(gates, whole, 10))
	other := submit(t, d, inQueue("other", gatedJob(gates, whole, 50)))
	d.schedule()
	if s := states(t, d); s[peer.ID] != api.Queued || s[other.ID] != api.Queued || s[high.ID] != api.Running {
		t.Fatalf("after an equal-priority submission: %v", s)
	}
	if j := job(t, d, high.ID); j.Preempt != nil {
		t.Fatalf("equal priority, or another queue's priority, marked a victim: %+v", j.Preempt)
	}
	for _, id := range []string{high.ID, peer.ID, other.ID} {
		openGate(t, gates, id, 0)
	}
	for _, id := range []string{high.ID, peer.ID, other.ID} {
		if j, _ := d.Wait(context.Background(), id); j.State != api.Succeeded {
			t.Fatalf("%s: %s", id, j.State)
		}
	}
}

// A restartable victim goes back to the queue, keeps its output, and runs
// again to completion once there is room. Its wait starts again: though it
// was submitted long before (aging would put it first), it does not take
// back the GPU from the job that preempted it.
func TestPreemptRestartableRequeues(t *testing.T) {
	gates := t.TempDir()
	clk := newClock()
	d := startDaemon(t, t.TempDir(), "1xH200", withClock(clk))
	whole := map[string]string{"count": "1"}
	low := submit(t, d, restartable(gatedJob(gates, whole, 0)))
	eventually(t, "low-priority job running", func() bool { return started(t, d, low.ID) })
	clk.advance(time.Hour) // aging alone would rank low at 60, high at 10
	high := submit(t, d, gatedJob(gates, whole, 10))
	eventually(t, "high-priority job running", func() bool { return states(t, d)[high.ID] == api.Running })
	v := job(t, d, low.ID)
	if v.State != api.Queued || v.Preemptions != 1 || v.LastPreemption == nil || v.LastPreemption.By != high.ID || v.Requeued == nil {
		t.Fatalf("restartable victim: state %s, preemptions %d, last %+v", v.State, v.Preemptions, v.LastPreemption)
	}
	d.schedule()
	if s := states(t, d); s[high.ID] != api.Running || s[low.ID] != api.Queued {
		t.Fatalf("after the preemption: %v", s)
	}
	q, err := d.Queue()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].ID != low.ID || q[0].Preemptions != 1 || !strings.Contains(q[0].Reason, "re-queued after preemption by "+high.ID) {
		t.Fatalf("queue = %+v", q)
	}
	openGate(t, gates, high.ID, 0)
	eventually(t, "victim running again", func() bool { return states(t, d)[low.ID] == api.Running })
	openGate(t, gates, low.ID, 0)
	j, err := d.Wait(context.Background(), low.ID)
	if err != nil || j.State != api.Succeeded || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("restarted job: %+v, %v", j, err)
	}
	out, _ := os.ReadFile(filepath.Join(d.JobDir(low.ID), "stdout.log"))
	if n := strings.Count(string(out), "GPU-"); n != 2 {
		t.Errorf("stdout has %d runs' output, want 2 (appended): %q", n, out)
	}
}

func withQueues(qs ...queueing.Queue) func(*Config) {
	return func(cfg *Config) { cfg.Queues = qs }
}

// A queue below its guarantee takes a GPU back from a queue that borrowed
// it, whatever the borrower's priorities; at its guarantee it waits.
func TestReclaimAcrossConfiguredQueues(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "2xH200", withQueues(
		queueing.Queue{Name: "owner", Guaranteed: queueing.Resources{GPUMilli: 1000}},
		queueing.Queue{Name: "borrower"},
	))
	whole := map[string]string{"count": "1"}
	b0 := submit(t, d, inQueue("borrower", gatedJob(gates, whole, 100)))
	b1 := submit(t, d, inQueue("borrower", gatedJob(gates, whole, 100)))
	eventually(t, "borrower uses the host", func() bool { return started(t, d, b0.ID) && started(t, d, b1.ID) })
	own := submit(t, d, inQueue("owner", gatedJob(gates, whole, 0)))
	eventually(t, "owner reclaims its GPU", func() bool { return states(t, d)[own.ID] == api.Running })
	var victim api.Job
	for _, id := range []string{b0.ID, b1.ID} {
		if j := job(t, d, id); j.State == api.Preempted {
			victim = j
		}
	}
	if victim.LastPreemption == nil || victim.LastPreemption.Kind != "reclaim" ||
		!strings.Contains(victim.Reason, "of queue owner, which is below its guaranteed share, to reclaim GPU capacity from queue borrower") {
		t.Fatalf("victim: %+v", victim)
	}
	// At its guarantee, the owner reclaims no more.
	own2 := submit(t, d, inQueue("owner", gatedJob(gates, whole, 0)))
	d.schedule()
	if s := states(t, d); s[own2.ID] != api.Queued {
		t.Fatalf("owner beyond its guarantee: %s", s[own2.ID])
	}
	running := 0
	for _, id := range []string{b0.ID, b1.ID} {
		if j := job(t, d, id); j.State == api.Running && j.Preempt == nil {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d borrower jobs left running, want 1", running)
	}
	checkBookings(t, d)
	qs, err := d.Queues()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.QueueStatus{}
	for _, q := range qs {
		byName[q.Name] = q
	}
	if o := byName["owner"]; !o.Configured || o.Guaranteed.GPUMilli != 1000 || o.Used.GPUMilli != 1000 || o.Running != 1 || o.Waiting != 1 {
		t.Errorf("owner queue: %+v", o)
	}
	if b := byName["borrower"]; b.Used.GPUMilli != 1000 || b.Running != 1 {
		t.Errorf("borrower queue: %+v", b)
	}
	if df := byName["default"]; df.Configured || df.Weight != 1 {
		t.Errorf("default queue: %+v", df)
	}
	drain(t, d, gates)
}

// A job that has run less than the minimum runtime is not preempted; the
// queue says so; once it has, it is.
func TestPreemptRespectsMinRuntime(t *testing.T) {
	gates := t.TempDir()
	clk := newClock()
	d := startDaemon(t, t.TempDir(), "1xH200", withClock(clk), withMinRuntime(time.Hour))
	whole := map[string]string{"count": "1"}
	low := submit(t, d, gatedJob(gates, whole, 0))
	eventually(t, "low-priority job running", func() bool { return started(t, d, low.ID) })
	clk.advance(59 * time.Minute)
	high := submit(t, d, gatedJob(gates, whole, 10))
	d.schedule()
	if j := job(t, d, low.ID); j.State != api.Running || j.Preempt != nil {
		t.Fatalf("protected job: state %s, preempt %+v", j.State, j.Preempt)
	}
	q, err := d.Queue()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || !strings.Contains(q[0].Reason, low.ID+" could be preempted once running for the minimum runtime (1h0m0s)") {
		t.Fatalf("queue = %+v", q)
	}
	clk.advance(time.Minute)
	eventually(t, "high-priority job running", func() bool { return states(t, d)[high.ID] == api.Running })
	if j := job(t, d, low.ID); j.State != api.Preempted {
		t.Fatalf("victim: %s", j.State)
	}
	drain(t, d, gates)
}

// trappingJob is gatedJob, except that on SIGTERM it touches
// gates/<id>.term and only exits once its gate is opened.
func trappingJob(gates string, fields map[string]string, prio int) api.SubmitRequest {
	r := gatedJob(gates, fields, prio)
	r.Command = []string{"/bin/sh", "-c", `g="$GATES/$TESSERA_JOB_ID"; trap 'touch "$g.term"' TERM; echo "$CUDA_VISIBLE_DEVICES"; while [ ! -s "$g" ]; do [ -d "$GATES" ] || exit 99; sleep 0.02; done; exit "$(cat "$g")"`}
	return r
}

// A daemon restart in the middle of a preemption loses nothing: the victim
// that exits while no daemon runs is recorded as preempted (with why), a
// re-queued restartable victim is still queued with its history, and the
// preemptor starts.
func TestRestartDuringPreemption(t *testing.T) {
	gates, state := t.TempDir(), t.TempDir()
	grace := func(cfg *Config) { cfg.StopGrace = time.Hour }
	d := startDaemon(t, state, "2xH200", grace)
	whole := map[string]string{"count": "1"}
	slow := submit(t, d, trappingJob(gates, whole, 0))
	again := submit(t, d, restartable(gatedJob(gates, whole, 1)))
	eventually(t, "two jobs running", func() bool { return started(t, d, slow.ID) && started(t, d, again.ID) })
	two := submit(t, d, gatedJob(gates, map[string]string{"count": "2"}, 5))
	eventually(t, "the slow victim got SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(gates, slow.ID+".term"))
		return err == nil
	})
	eventually(t, "the restartable victim re-queued", func() bool { return states(t, d)[again.ID] == api.Queued })
	d.shutdown()

	openGate(t, gates, slow.ID, 143)
	eventually(t, "exit recorded without a daemon", func() bool {
		_, err := os.Stat(filepath.Join(state, "jobs", slow.ID, "exit.json"))
		return err == nil
	})
	d2 := startDaemon(t, state, "2xH200", grace)
	v, err := d2.Wait(context.Background(), slow.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != api.Preempted || v.LastPreemption == nil || v.LastPreemption.By != two.ID || !strings.Contains(v.Reason, "preempted by "+two.ID) {
		t.Fatalf("victim after restart: %+v", v)
	}
	eventually(t, "the preemptor starts", func() bool { return states(t, d2)[two.ID] == api.Running })
	a := job(t, d2, again.ID)
	if a.State != api.Queued || a.Preemptions != 1 || a.LastPreemption == nil || a.LastPreemption.By != two.ID {
		t.Fatalf("re-queued victim after restart: %+v", a)
	}
	openGate(t, gates, two.ID, 0)
	eventually(t, "the re-queued job runs again", func() bool { return states(t, d2)[again.ID] == api.Running })
	openGate(t, gates, again.ID, 0)
	if j, _ := d2.Wait(context.Background(), again.ID); j.State != api.Succeeded {
		t.Fatalf("re-queued job: %s", j.State)
	}
	if jobs, _ := d2.Jobs(); len(jobs) != 3 {
		t.Errorf("%d jobs after restart, want 3", len(jobs))
	}
}

func TestUnknownQueueRejected(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "1xH200", withQueues(queueing.Queue{Name: "research"}))
	_, err := d.Submit(inQueue("nope", gatedJob(t.TempDir(), map[string]string{"count": "1"}, 0)))
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != "queue" || !strings.Contains(ie.Msg, `queue "nope" is not configured; this daemon's queues are default, research`) {
		t.Fatalf("err = %v", err)
	}
	if jobs, _ := d.Jobs(); len(jobs) != 0 {
		t.Errorf("%d jobs queued", len(jobs))
	}
	for _, q := range []string{"research", "default", ""} {
		j, err := d.Submit(inQueue(q, api.SubmitRequest{GPU: map[string]string{"count": "1", "compute": "0.1"}, Command: []string{"/bin/true"}}))
		if err != nil {
			t.Fatalf("queue %q: %v", q, err)
		}
		if j, _ := d.Wait(context.Background(), j.ID); j.State != api.Succeeded {
			t.Errorf("queue %q: job %s", q, j.State)
		}
	}
}
