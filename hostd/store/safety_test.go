package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// A crash or a full disk left record.json.tmp (and atomicfile's
// temporaries) in job folders: Open removes them, and nothing else, and
// not the exit status's of a running job (its supervisor may be writing
// it).
func TestOpenRemovesStaleTemporaryFiles(t *testing.T) {
	dir := newState(t, 2)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	running, err := s.Get("job-2")
	if err != nil {
		t.Fatal(err)
	}
	running.State = api.Running
	if err := s.Put(running); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	inFlight := filepath.Join(JobDir(dir, "job-2"), ".exit.json.abcdef.tmp")
	runningMirror := filepath.Join(JobDir(dir, "job-2"), ".record.json.abcdef.tmp")
	for _, p := range []string{inFlight, runningMirror} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := JobDir(dir, "job-1")
	stale := []string{"record.json.tmp", ".record.json.0a1b2c.tmp", ".exit.json.ffee00.tmp", ".spec.json.123456.tmp"}
	keep := []string{"notes.tmp", ".record.json.tmp", "stdout.log"}
	for _, name := range append(append([]string{}, stale...), keep...) {
		if err := os.WriteFile(filepath.Join(job, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(inFlight); err != nil {
		t.Errorf("a running job's exit status temporary was removed: %v", err)
	}
	if _, err := os.Lstat(runningMirror); err == nil {
		t.Errorf("a running job's stale record temporary is still there")
	}
	for _, name := range stale {
		if _, err := os.Lstat(filepath.Join(job, name)); err == nil {
			t.Errorf("%s is still there", name)
		}
	}
	for _, name := range keep {
		if _, err := os.Lstat(filepath.Join(job, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
}

// The database and the job folders are opened through no link.
func TestOpenFollowsNoLink(t *testing.T) {
	dir := newState(t, 1)
	elsewhere := filepath.Join(t.TempDir(), "jobs.db")
	if err := os.Rename(filepath.Join(dir, DBFile), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, DBFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("Open with jobs.db a link: %v, want a refusal naming the link", err)
	}
	if _, err := Recover(dir, time.Now()); err == nil {
		t.Error("Recover with jobs.db a link: no error")
	}
	// A job's record is not written through a linked job folder.
	dir = newState(t, 2)
	target := t.TempDir()
	job := JobDir(dir, "job-2")
	if err := os.RemoveAll(job); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, job); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("open after recovery (%+v): %v", rep, err)
	}
	j, err := s.Get("job-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(j); err != nil {
		t.Fatal(err)
	}
	if j, err = s.Get("job-2"); err == nil {
		_ = s.Put(j)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the store wrote %d entries (%s...) through a linked job folder", len(ents), ents[0].Name())
	}
}

// A mirror that is not this folder's record (another sequence number, a
// state no job has) is not restored as it is.
func TestRecoverChecksTheMirror(t *testing.T) {
	dir := newState(t, 2)
	if err := os.WriteFile(filepath.Join(JobDir(dir, "job-2"), RecordFile), []byte(`{"id":"job-2","seq":99,"state":"queued"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(JobDir(dir, "job-1"), RecordFile), []byte(`{"id":"job-1","seq":1,"state":"exploded"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.FromMirror) != 0 || rep.NextID != "job-3" {
		t.Errorf("recovery %+v: want no record from the bad mirrors and job-3 next", rep)
	}
}

// A jobs folder another user owns is refused (root only: chown).
func TestOpenRefusesAnotherUsersJobsFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it gives the jobs folder to uid 65534 with chown")
	}
	dir := newState(t, 1)
	if err := os.Chown(filepath.Join(dir, JobsDir), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, nil)
	if !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("Open: %v, want a refusal naming uid 65534", err)
	}
}
