package grant

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/internal/ctest"
)

// patience bounds every wait; only a broken library or writer reaches it.
const patience = 30 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTheLibraryObeysTheWriter runs the real interception library (over the
// fake driver) gated by a region this package wrote: launches block without
// tokens, show up as waiters, and proceed one per token granted.
func TestTheLibraryObeysTheWriter(t *testing.T) {
	if !ctest.HaveGCC() {
		t.Skip("gcc not found: the interception library is C")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	b, err := ctest.Compile(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now, err := Monotonic()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "grant")
	r, err := Create(path, Options{Devices: 1, StaleAfter: 10 * time.Minute, Heartbeat: now})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	cmd := exec.CommandContext(ctx, b.Tprog, "launch:kernel:3", "stats")
	cmd.Env = b.Env(t.TempDir(), "ctr-1", "TESSERA_ARBITER_REGION="+path, "TESSERA_COMPUTE_FAIL=closed")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	eventually(t, "the first launch waits", func() bool { return r.Read(0).Waiters == 1 })
	select {
	case err := <-done:
		t.Fatalf("tprog ran without tokens: %v\n%s%s", err, out.String(), errOut.String())
	default:
	}
	r.Add(0, 1)
	eventually(t, "the second launch waits", func() bool { c := r.Read(0); return c.Waits == 2 && c.Waiters == 1 })
	r.Add(0, 5)
	if err := <-done; err != nil {
		t.Fatalf("tprog: %v\n%s", err, errOut.String())
	}
	want := "launch kernel 1 rc=0\nlaunch kernel 2 rc=0\nlaunch kernel 3 rc=0\nstats launches=3 managed=0 device=0\n"
	if out.String() != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", out.String(), want, errOut.String())
	}
	c := r.Read(0)
	if c.Tokens != 3 || c.Waiters != 0 || c.Ungated != 0 {
		t.Fatalf("record after the run: %+v, want 3 tokens left, no waiters, nothing ungated", c)
	}
	if strings.Contains(errOut.String(), "ungated") {
		t.Fatalf("library ran ungated: %s", errOut.String())
	}
}
