package hostd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/store"
)

func TestSubmitRejectsBadInput(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "2xH200")
	ok := []string{"/bin/true"}
	tests := []struct {
		name  string
		req   api.SubmitRequest
		field string
	}{
		{"fraction zero", api.SubmitRequest{GPU: map[string]string{"compute": "0"}, Command: ok}, "compute"},
		{"limit below request", api.SubmitRequest{GPU: map[string]string{"compute": "0.5", "compute-limit": "0.25"}, Command: ok}, "compute-limit"},
		{"more GPUs than the host", api.SubmitRequest{GPU: map[string]string{"count": "3"}, Command: ok}, "count"},
		{"model not on host", api.SubmitRequest{GPU: map[string]string{"model": "T4"}, Command: ok}, "model"},
		{"unknown field", api.SubmitRequest{GPU: map[string]string{"colour": "red"}, Command: ok}, "colour"},
		{"no command", api.SubmitRequest{GPU: map[string]string{"count": "1"}}, "command"},
		{"relative command", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"true"}}, "command"},
		{"missing command", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"/nonexistent/tool"}}, "command"},
		{"bad queue", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: ok, Queue: "Bad Queue"}, "queue"},
		{"queue name the queue tree rejects", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: ok, Queue: "my_queue"}, "queue"},
		{"priority out of range", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: ok, Priority: 5000}, "priority"},
		{"mig profile the host lacks", api.SubmitRequest{GPU: map[string]string{"mig-profile": "1g.10gb"}, Command: ok}, "mig-profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Submit(tt.req)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("err = %v, want an InputError on field %q", err, tt.field)
			}
		})
	}
	if jobs, _ := d.Jobs(); len(jobs) != 0 {
		t.Errorf("bad submissions queued %d jobs", len(jobs))
	}
}

// Fractional jobs fill two GPUs; later ones queue and start in priority,
// then submission order; no GPU is ever booked past its capacity. (With
// preemption off: the high-priority job would otherwise stop a running one.)
func TestQueueingOrderAndNoOverAllocation(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "2xH200", func(c *Config) { c.DisablePreemption = true })
	half := map[string]string{"compute": "0.5"}
	var ids []string
	for i := 0; i < 4; i++ {
		j, err := d.Submit(gatedJob(gates, half, 0))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	eventually(t, "four half-GPU jobs running", func() bool {
		st, _ := d.Status()
		return st.Running == 4
	})
	low, _ := d.Submit(gatedJob(gates, half, 0))
	whole, _ := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	high, _ := d.Submit(gatedJob(gates, half, 5))
	q, err := d.Queue()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range q {
		order = append(order, e.ID)
	}
	if want := []string{high.ID, low.ID, whole.ID}; !slices.Equal(order, want) {
		t.Fatalf("queue order = %v, want %v", order, want)
	}
	if !strings.Contains(q[0].Reason, "waiting for GPU capacity") || !strings.Contains(q[1].Reason, "behind "+high.ID) {
		t.Errorf("queue reasons = %q, %q", q[0].Reason, q[1].Reason)
	}
	checkBookings(t, d)

	// Free one half GPU: the high-priority job takes it, the others wait.
	openGate(t, gates, ids[0], 0)
	eventually(t, "high-priority job running", func() bool { return states(t, d)[high.ID] == api.Running })
	checkBookings(t, d)
	if s := states(t, d); s[low.ID] != api.Queued || s[whole.ID] != api.Queued {
		t.Fatalf("after one release: %v", s)
	}
	openGate(t, gates, ids[1], 0)
	eventually(t, "low-priority job running", func() bool { return states(t, d)[low.ID] == api.Running })
	checkBookings(t, d)
	for _, id := range append(ids[2:], high.ID, low.ID) {
		openGate(t, gates, id, 0)
	}
	openGate(t, gates, whole.ID, 7)
	for _, id := range append(ids, high.ID, low.ID) {
		j, err := d.Wait(context.Background(), id)
		if err != nil || j.State != api.Succeeded || *j.ExitCode != 0 {
			t.Fatalf("%s: %+v, %v", id, j, err)
		}
		out, _ := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
		if !strings.HasPrefix(string(out), "GPU-") {
			t.Errorf("%s printed CUDA_VISIBLE_DEVICES %q, want a GPU UUID", id, out)
		}
	}
	j, _ := d.Wait(context.Background(), whole.ID)
	if j.State != api.Failed || j.ExitCode == nil || *j.ExitCode != 7 {
		t.Errorf("whole-GPU job: state %s exit %v, want failed with 7", j.State, j.ExitCode)
	}
	st, _ := d.Status()
	for _, g := range st.GPUs {
		if g.FreeFraction != 1 {
			t.Errorf("GPU %d free %v after all jobs ended, want 1", g.Index, g.FreeFraction)
		}
	}
}

// checkBookings sums the compute of running jobs on each GPU from the job
// records and checks it never exceeds a whole GPU and matches the daemon's view.
func checkBookings(t *testing.T, d *testDaemon) {
	t.Helper()
	jobs, _ := d.Jobs()
	used := map[string]int64{}
	for _, j := range jobs {
		if j.State == api.Running {
			for _, s := range j.Shares {
				used[s.UUID] += s.ComputeMilli
			}
		}
	}
	st, _ := d.Status()
	for _, g := range st.GPUs {
		if used[g.UUID] > 1000 {
			t.Errorf("GPU %s over-allocated: %dm", g.UUID, used[g.UUID])
		}
		if free := int64(g.FreeFraction*1000 + 0.5); free != 1000-used[g.UUID] {
			t.Errorf("GPU %s: daemon says %dm free, records say %dm used", g.UUID, free, used[g.UUID])
		}
	}
}

// Restarting the daemon loses no queued job, re-adopts running ones and
// records the exit code of a job that ended while it was down.
func TestRestartKeepsQueueAndAdoptsRunning(t *testing.T) {
	gates, state := t.TempDir(), t.TempDir()
	d := startDaemon(t, state, "2xH200")
	whole := map[string]string{"count": "1"}
	var ids []string
	for i := 0; i < 3; i++ {
		j, err := d.Submit(gatedJob(gates, whole, 0))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	eventually(t, "two jobs running", func() bool {
		s := states(t, d)
		return s[ids[0]] == api.Running && s[ids[1]] == api.Running
	})
	d.shutdown()

	// ids[0] ends while no daemon runs; its supervisor records the exit.
	openGate(t, gates, ids[0], 3)
	eventually(t, "exit recorded without a daemon", func() bool {
		_, err := os.Stat(filepath.Join(state, "jobs", ids[0], "exit.json"))
		return err == nil
	})

	d2 := startDaemon(t, state, "2xH200")
	j0, err := d2.Wait(context.Background(), ids[0])
	if err != nil || j0.State != api.Failed || j0.ExitCode == nil || *j0.ExitCode != 3 {
		t.Fatalf("job that ended during the restart: %+v, %v", j0, err)
	}
	eventually(t, "queued job starts on the freed GPU", func() bool { return states(t, d2)[ids[2]] == api.Running })
	if s := states(t, d2); s[ids[1]] != api.Running {
		t.Fatalf("adopted job: %s", s[ids[1]])
	}
	checkBookings(t, d2)

	openGate(t, gates, ids[1], 0)
	if j, err := d2.Wait(context.Background(), ids[1]); err != nil || j.State != api.Succeeded {
		t.Fatalf("adopted job end: %+v, %v", j, err)
	}
	if _, err := d2.Stop(ids[2]); err != nil {
		t.Fatal(err)
	}
	j2, err := d2.Wait(context.Background(), ids[2])
	if err != nil || j2.State != api.Stopped || j2.ExitCode == nil || *j2.ExitCode != 128+15 {
		t.Fatalf("stopped job: %+v, %v", j2, err)
	}
	if _, err := d2.Stop(ids[2]); !errors.Is(err, ErrFinished) {
		t.Errorf("second stop: %v, want ErrFinished", err)
	}
	jobs, _ := d2.Jobs()
	if len(jobs) != 3 {
		t.Errorf("%d jobs after restart, want 3", len(jobs))
	}
}

func TestStopQueuedJob(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH200")
	a, _ := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	b, _ := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	eventually(t, "first job running", func() bool { return states(t, d)[a.ID] == api.Running })
	if j, err := d.Stop(b.ID); err != nil || j.State != api.Stopped {
		t.Fatalf("stop queued: %+v, %v", j, err)
	}
	openGate(t, gates, a.ID, 0)
	if j, _ := d.Wait(context.Background(), a.ID); j.State != api.Succeeded {
		t.Fatalf("first job: %s", j.State)
	}
	if s := states(t, d)[b.ID]; s != api.Stopped {
		t.Errorf("stopped queued job started anyway: %s", s)
	}
}

// A running record whose supervisor is gone without an exit status is
// marked lost, never dropped; a reused pid is not mistaken for it.
func TestRecoverLostJob(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "jobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{gone.Process.Pid, os.Getpid()} {
		// os.Getpid() with a wrong start time stands for a reused pid.
		if _, err := st.Create(api.Job{State: api.Running, Command: []string{"/bin/true"}, GPU: mustGPU(t), GPUs: []int{0}, SupervisorPID: pid, SupervisorStart: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Close()
	d := startDaemon(t, state, "1xH200")
	jobs, _ := d.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		if j.State != api.Lost || !strings.Contains(j.Reason, "without recording an exit status") {
			t.Errorf("%s: state %s reason %q, want lost", j.ID, j.State, j.Reason)
		}
	}
}
