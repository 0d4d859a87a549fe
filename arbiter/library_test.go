package arbiter

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/internal/ctest"
	"github.com/tessera-gpu/tessera/binding"
)

// TestTheLibraryRunsOnTheArbitersGrants registers a container, runs the
// real interception library (over the fake driver) against the region the
// arbiter published, and checks that launches stop when the guarantee
// cushion is spent and resume after a step hands out the client's share.
func TestTheLibraryRunsOnTheArbitersGrants(t *testing.T) {
	if !ctest.HaveGCC() {
		t.Skip("gcc not found: the interception library is C")
	}
	const patience = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	b, err := ctest.Compile(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	a, err := New(Config{Clock: clock, Logger: quiet(), StaleAfter: 10 * time.Minute}) // real CLOCK_MONOTONIC heartbeats
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	dir := t.TempDir()
	// Guarantee 10, limit 20: 10 tokens at registration, 20 per period when busy.
	if err := a.Register(ctx, Client{Key: "ctr-1", Dir: dir, GPUs: []binding.Share{gpuShare("G", 10, 20)}}); err != nil {
		t.Fatal(err)
	}
	lib := attach(t, dir)

	cmd := exec.CommandContext(ctx, b.Tprog, "launch:kernel:25", "stats")
	cmd.Env = b.Env(dir, "ctr-1", "TESSERA_ARBITER_REGION="+filepath.Join(dir, RegionFile), "TESSERA_COMPUTE_FAIL=closed")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(patience)
	for atomic.LoadUint64((*uint64)(lib.word(0, 8))) != 1 { // waiters
		if time.Now().After(deadline) {
			t.Fatalf("no launch waited; stderr:\n%s", errOut.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case err := <-exited:
		t.Fatalf("tprog finished on the 10-token cushion alone: %v\n%s", err, out.String())
	default:
	}
	if n := lib.tokens(0); n != 0 {
		t.Fatalf("%d tokens left while a launch waits", n)
	}
	clock.Advance(DefaultPeriod)
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("tprog: %v\n%s", err, errOut.String())
	}
	if got := lastLine(out.String()); got != "stats launches=25 managed=0 device=0" {
		t.Fatalf("last line %q; stdout:\n%s\nstderr:\n%s", got, out.String(), errOut.String())
	}
	if n := lib.tokens(0); n != 5 {
		t.Fatalf("%d tokens left, want 5 (20 granted, 15 launched)", n)
	}
	if st := a.Snapshot()[0]; st.Phase != "active" || st.Share != 20 {
		t.Fatalf("snapshot %+v, want active at its 20 limit", st)
	}
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n"))
	return string(lines[len(lines)-1])
}
