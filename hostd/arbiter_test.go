package hostd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

type fakeArbiter struct {
	mu       sync.Mutex
	admitted map[string]string
	released []string
	// env is every job's client environment; envErr fails ClientEnv.
	env    map[string]string
	envErr error
}

func (f *fakeArbiter) ClientEnv(_ context.Context, id string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.admitted[id]; !ok {
		return nil, errors.New("not admitted")
	}
	return f.env, f.envErr
}

func (f *fakeArbiter) Admit(j api.Job, shmDir string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admitted[j.ID] = shmDir
	return filepath.Join(shmDir, "grant"), nil
}

func (f *fakeArbiter) Release(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, id)
}

// With an arbiter wired in, a job gets its grant region and its client
// variables (which never replace the daemon's own), and is released when
// it ends.
func TestArbiterSeam(t *testing.T) {
	arb := &fakeArbiter{admitted: map[string]string{}, env: map[string]string{"CUDA_MPS_PIPE_DIRECTORY": "/mps/pipe", "TESSERA_JOB_ID": "spoofed"}}
	d := startDaemon(t, t.TempDir(), "1xH200", func(c *Config) { c.Arbiter = arb })
	j, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/sh", "-c", `echo "$TESSERA_ARBITER_REGION $CUDA_MPS_PIPE_DIRECTORY $TESSERA_JOB_ID"`}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = d.Wait(context.Background(), j.ID); err != nil || j.State != api.Succeeded {
		t.Fatalf("job: %+v, %v", j, err)
	}
	out, _ := os.ReadFile(filepath.Join(d.JobDir(j.ID), "stdout.log"))
	shm := filepath.Join(d.JobDir(j.ID), "shm")
	if want := filepath.Join(shm, "grant") + " /mps/pipe " + j.ID; strings.TrimSpace(string(out)) != want {
		t.Errorf("job printed %q, want %q", out, want)
	}
	arb.mu.Lock()
	defer arb.mu.Unlock()
	if arb.admitted[j.ID] != shm || len(arb.released) != 1 || arb.released[0] != j.ID {
		t.Errorf("admitted %v, released %v", arb.admitted, arb.released)
	}
}

// A job whose client variables cannot be had does not start, and its
// arbiter seat is released.
func TestArbiterClientEnvFailure(t *testing.T) {
	arb := &fakeArbiter{admitted: map[string]string{}, envErr: errors.New("no pipe")}
	d := startDaemon(t, t.TempDir(), "1xH200", func(c *Config) { c.Arbiter = arb })
	j, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = d.Wait(context.Background(), j.ID); err != nil || j.State != api.Failed || !strings.Contains(j.Reason, "could not start: arbiter: no pipe") {
		t.Fatalf("job: %+v, %v; want failed, naming the arbiter's error", j, err)
	}
	arb.mu.Lock()
	defer arb.mu.Unlock()
	if len(arb.released) != 1 || arb.released[0] != j.ID {
		t.Errorf("released %v, want [%s]", arb.released, j.ID)
	}
	if st, _ := d.Status(); st.GPUs[0].FreeFraction != 1 {
		t.Errorf("GPU free fraction %v after the failed start, want 1", st.GPUs[0].FreeFraction)
	}
}
