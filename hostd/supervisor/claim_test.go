package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestClaimFirstWins(t *testing.T) {
	dir := t.TempDir()
	path := ClaimFile(dir, 1)
	if _, ok, err := ReadClaim(path); ok || err != nil {
		t.Fatalf("unclaimed run: ok %v, err %v", ok, err)
	}
	if err := Claim(path, 1234, 99); err != nil {
		t.Fatal(err)
	}
	if err := Cancel(path); !errors.Is(err, ErrClaimed) {
		t.Fatalf("Cancel after a supervisor's claim = %v, want ErrClaimed", err)
	}
	c, ok, err := ReadClaim(path)
	if err != nil || !ok || c.Cancelled || c.PID != 1234 || c.Start != 99 {
		t.Fatalf("ReadClaim = %+v %v %v, want supervisor 1234 started at 99", c, ok, err)
	}

	other := ClaimFile(dir, 2)
	if err := Cancel(other); err != nil {
		t.Fatal(err)
	}
	if err := Claim(other, 1234, 99); !errors.Is(err, ErrClaimed) {
		t.Fatalf("Claim after a cancel = %v, want ErrClaimed", err)
	}
	if c, ok, err := ReadClaim(other); err != nil || !ok || !c.Cancelled {
		t.Fatalf("ReadClaim of a cancelled run = %+v %v %v", c, ok, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".claim-*")); len(left) != 0 {
		t.Errorf("temporary claim files left: %v", left)
	}
}

// A supervisor that comes late to a run a restarted daemon cancelled (and
// queued again) must not start the job, nor record an exit for it.
func TestRunOfACancelledRunStartsNothing(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	claim := ClaimFile(dir, 1)
	spec := Spec{Command: []string{"/bin/sh", "-c", "touch " + ran}, Env: []string{"PATH=/usr/bin:/bin"}, Claim: claim}
	if err := WriteJSON(filepath.Join(dir, SpecFile), spec); err != nil {
		t.Fatal(err)
	}
	if err := Cancel(claim); err != nil {
		t.Fatal(err)
	}
	if code := Run(dir); code != 0 {
		t.Fatalf("Run = %d, want 0", code)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the job ran although its run was cancelled")
	}
	if _, ok, _ := ReadExit(dir); ok {
		t.Error("an exit was recorded for a cancelled run")
	}

	// The same spec with a fresh claim runs, once.
	spec.Claim = ClaimFile(dir, 2)
	if err := WriteJSON(filepath.Join(dir, SpecFile), spec); err != nil {
		t.Fatal(err)
	}
	if code := Run(dir); code != 0 {
		t.Fatalf("Run = %d, want 0", code)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("the job did not run on its own claim: %v", err)
	}
	if c, ok, err := ReadClaim(spec.Claim); err != nil || !ok || c.PID != os.Getpid() {
		t.Errorf("claim after the run = %+v %v %v, want this process", c, ok, err)
	}
}
