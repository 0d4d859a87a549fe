package hostd

import (
	"context"
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

// With an arbiter wired in, a job gets its grant region and is released
// when it ends.
func TestArbiterSeam(t *testing.T) {
	arb := &fakeArbiter{admitted: map[string]string{}}
	d := startDaemon(t, t.TempDir(), "1xH200", func(c *Config) { c.Arbiter = arb })
	j, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/sh", "-c", `echo "$TESSERA_ARBITER_REGION"`}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = d.Wait(context.Background(), j.ID); err != nil || j.State != api.Succeeded {
		t.Fatalf("job: %+v, %v", j, err)
	}
	out, _ := os.ReadFile(filepath.Join(d.JobDir(j.ID), "stdout.log"))
	shm := filepath.Join(d.JobDir(j.ID), "shm")
	if strings.TrimSpace(string(out)) != filepath.Join(shm, "grant") {
		t.Errorf("TESSERA_ARBITER_REGION = %q, want %s/grant", out, shm)
	}
	arb.mu.Lock()
	defer arb.mu.Unlock()
	if arb.admitted[j.ID] != shm || len(arb.released) != 1 || arb.released[0] != j.ID {
		t.Errorf("admitted %v, released %v", arb.admitted, arb.released)
	}
}
