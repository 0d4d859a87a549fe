package hostd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/nvmlmeter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestArbiterSeat(t *testing.T) {
	arb, err := arbiter.New(arbiter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seat := ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}}
	share := func(uuid string, idx int, milli int64) binding.Share {
		return binding.Share{UUID: uuid, Index: idx, ComputeMilli: milli, ComputeLimitMilli: 1000, MemoryMiB: 1024, MemoryLimitMiB: 1024}
	}
	dir := t.TempDir()
	job := api.Job{ID: "j1", Shares: []binding.Share{share("GPU-b", 1, 600), share("GPU-a", 0, 600)}}
	region, err := seat.Admit(job, dir)
	if err != nil {
		t.Fatal(err)
	}
	if region != filepath.Join(dir, arbiter.RegionFile) {
		t.Fatalf("region = %s", region)
	}
	if _, err := os.Stat(region); err != nil {
		t.Fatalf("no region file: %v", err)
	}
	// Devices are registered in index order: ordinal 0 is GPU-a.
	for _, s := range arb.Snapshot() {
		if (s.Device == 0) != (s.GPU == "GPU-a") {
			t.Errorf("device %d is %s", s.Device, s.GPU)
		}
	}
	// Re-admitting (a re-adopted job) replaces the seat; a second job that
	// would overbook a GPU is refused.
	if _, err := seat.Admit(job, dir); err != nil {
		t.Fatalf("re-admit: %v", err)
	}
	_, err = seat.Admit(api.Job{ID: "j2", Shares: []binding.Share{share("GPU-a", 0, 500)}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "must be at most 1000") {
		t.Fatalf("overbooking: %v", err)
	}
	seat.Release("j1")
	seat.Release("j1") // twice is fine
	if n := len(arb.Snapshot()); n != 0 {
		t.Fatalf("%d seats after release", n)
	}
}

// TestJobTreeResolvesJobProcesses runs a job and checks that the NVML
// meter's resolvers, on the real /proc, map its process to the job: by the
// process tree under its supervisor, and by its TESSERA_CONTAINER_ID.
func TestJobTreeResolvesJobProcesses(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH200")
	tree := &JobTree{}
	if roots, err := tree.Roots(context.Background()); err != nil || roots != nil {
		t.Fatalf("before Set: %v, %v", roots, err)
	}
	clock := time.Unix(1000, 0)
	tree.Now = func() time.Time { return clock }
	tree.Set(d.Daemon)
	// The job writes its shell's PID, then waits for its gate.
	script := `echo $$ > "$GATES/pid.tmp"; mv "$GATES/pid.tmp" "$GATES/pid"; while [ ! -e "$GATES/go" ]; do [ -d "$GATES" ] || exit 99; sleep 0.02; done`
	j, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/sh", "-c", script},
		Env: []string{"GATES=" + gates, "PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	var pid uint64
	eventually(t, "the job's PID", func() bool {
		data, err := os.ReadFile(filepath.Join(gates, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 32)
		return err == nil
	})
	job, err := d.Job(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := tree.Roots(context.Background())
	if err != nil || roots[job.SupervisorPID] != j.ID || len(roots) != 1 {
		t.Fatalf("roots = %v, %v; want supervisor %d → %s", roots, err, job.SupervisorPID, j.ID)
	}
	for name, r := range map[string]nvmlmeter.Resolver{
		"process tree": nvmlmeter.ProcTree{Roots: tree.Roots},
		"environment":  nvmlmeter.Environ{},
	} {
		key, ok, err := r.Resolve(context.Background(), uint32(pid))
		if key != j.ID || !ok || err != nil {
			t.Errorf("%s: pid %d resolves to %q, %v, %v; want %s", name, pid, key, ok, err, j.ID)
		}
	}
	// This test process is no job's.
	if key, ok, err := (nvmlmeter.ProcTree{Roots: tree.Roots}).Resolve(context.Background(), uint32(os.Getpid())); ok || err != nil {
		t.Errorf("the test process resolves to %q, %v", key, err)
	}
	if err := os.WriteFile(filepath.Join(gates, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if j, err = d.Wait(context.Background(), j.ID); err != nil || j.State != api.Succeeded {
		t.Fatalf("job: %+v, %v", j, err)
	}
	// Cached for a second, then read again: the finished job is gone.
	if roots, _ := tree.Roots(context.Background()); len(roots) != 1 {
		t.Errorf("within the second: roots = %v, want the cached one", roots)
	}
	clock = clock.Add(time.Second)
	if roots, err := tree.Roots(context.Background()); err != nil || len(roots) != 0 {
		t.Errorf("after the job: roots = %v, %v; want none", roots, err)
	}
}

// TestMetersReadWithoutTheDaemonLock: the node arbiter reads its meter
// under its own lock while the daemon may hold its own lock and call the
// arbiter (admitting a job): the meters' view of the jobs must not need
// the daemon's lock, or the two wait for each other forever.
func TestMetersReadWithoutTheDaemonLock(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "1xH200")
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	tree := &JobTree{}
	tree.Set(d)
	sim := &SimMeter{Jobs: tree}
	d.mu.Lock()
	defer d.mu.Unlock()
	done := make(chan error, 2)
	go func() { _, err := tree.Roots(t.Context()); done <- err }()
	go func() {
		_, err := sim.Read(t.Context(), "gpu-0", nil) // the first reading only starts the span
		if err == nil {
			_, err = sim.jobLoads(t.Context(), time.Now())
		}
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute): // a liveness guard, not a timing measure
			t.Fatal("a meter waits for the daemon's lock")
		}
	}
}
