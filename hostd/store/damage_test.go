package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// newState makes a state folder with n jobs (job-1 failed with code 3,
// the rest queued) and closes it.
func newState(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		j, err := s.Create(api.Job{Queue: fmt.Sprintf("q%d", i), State: api.Queued, Command: []string{"/bin/true"}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			code := 3
			j.State, j.ExitCode = api.Failed, &code
			if err := s.Put(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func overwrite(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

// Defects: a damaged jobs.db panicked the daemon (truncated: "invalid
// freelist page"; zeroed pages: "assertion failed"), random bytes over
// the first page fell back silently to an older header, and an empty or
// missing database beside job folders reused their IDs. Each is refused
// with an error naming the file and what is wrong, and recovered.
func TestDamagedDatabaseIsRefusedThenRecovered(t *testing.T) {
	page := int64(os.Getpagesize())
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, db string)
		want   string
	}{
		{"truncated", func(t *testing.T, db string) { must(t, os.Truncate(db, 10000)) }, "truncated"},
		{"zeroed data pages", func(t *testing.T, db string) { overwrite(t, db, 2*page, make([]byte, 4*page)) }, "jobs.db"},
		{"random bytes over the first page", func(t *testing.T, db string) { overwrite(t, db, 0, random(int(page))) }, "header page 0 is damaged"},
		{"random bytes over the second page", func(t *testing.T, db string) { overwrite(t, db, page, random(int(page))) }, "header page 1 is damaged"},
		{"emptied", func(t *testing.T, db string) { must(t, os.Truncate(db, 0)) }, "it is empty, but 4 job folders exist"},
		{"missing", func(t *testing.T, db string) { must(t, os.Remove(db)) }, "it is missing, but 4 job folders exist"},
		{"rolled back to an older copy", func(t *testing.T, db string) {
			// A copy taken with two jobs, restored after four.
			old := newState(t, 2)
			data, err := os.ReadFile(filepath.Join(old, DBFile))
			must(t, err)
			must(t, os.WriteFile(db, data, 0o600))
		}, "no record of 2 job folder(s) ([job-3 job-4])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newState(t, 4)
			db := filepath.Join(dir, DBFile)
			tt.damage(t, db)
			_, err := Open(dir, nil)
			openErr := err
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open = %v, want ErrDamaged", err)
			}
			if !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name the file %s and say %q", err, db, tt.want)
			}
			rep, err := Recover(dir, time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatalf("Recover: %v (after Open said %v)", err, openErr)
			}
			if rep.NextID != "job-5" {
				t.Errorf("next ID after recovery = %s, want job-5 (IDs are never reused)", rep.NextID)
			}
			if len(rep.FromMirror) != 4 {
				t.Errorf("restored from mirrors: %v, want all 4", rep.FromMirror)
			}
			if _, err := os.Stat(db); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatalf("Open after Recover: %v", err)
			}
			defer s.Close()
			jobs, err := s.List()
			if err != nil || len(jobs) != 4 {
				t.Fatalf("List after Recover = %d jobs, %v", len(jobs), err)
			}
			if jobs[0].State != api.Failed || jobs[0].ExitCode == nil || *jobs[0].ExitCode != 3 || jobs[3].Queue != "q3" {
				t.Errorf("recovered records differ: %+v ... %+v", jobs[0], jobs[3])
			}
			if j, err := s.Create(api.Job{State: api.Queued}); err != nil || j.ID != "job-5" {
				t.Errorf("Create after Recover = %s, %v; want job-5", j.ID, err)
			}
		})
	}
}

// A folder whose record mirror is gone too is rebuilt from the
// supervisor's files: its command and exit status, never run again.
func TestRecoverRebuildsLostRecords(t *testing.T) {
	dir := newState(t, 2)
	must(t, os.Remove(filepath.Join(dir, DBFile)))
	must(t, os.Remove(filepath.Join(JobDir(dir, "job-2"), RecordFile)))
	must(t, os.WriteFile(filepath.Join(JobDir(dir, "job-2"), "spec.json"), []byte(`{"command":["/bin/echo","hi"]}`), 0o600))
	must(t, os.WriteFile(filepath.Join(JobDir(dir, "job-2"), "exit.json"), []byte(`{"code":0,"reason":"exit status 0"}`), 0o600))
	must(t, os.MkdirAll(JobDir(dir, "job-7"), 0o700)) // nothing in it
	rep, err := Recover(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Rebuilt) != "[job-2 job-7]" || rep.NextID != "job-8" {
		t.Errorf("report = %+v, want job-2 and job-7 rebuilt, next job-8", rep)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j2, _ := s.Get("job-2")
	j7, _ := s.Get("job-7")
	if j2.State != api.Succeeded || strings.Join(j2.Command, " ") != "/bin/echo hi" {
		t.Errorf("job-2 = %s %v, want succeeded /bin/echo hi", j2.State, j2.Command)
	}
	if j7.State != api.Lost || !strings.Contains(j7.Reason, "record was lost") {
		t.Errorf("job-7 = %s %q, want lost", j7.State, j7.Reason)
	}
}

// Recovery refuses while a daemon holds the database.
func TestRecoverRefusesAHeldDatabase(t *testing.T) {
	dir := newState(t, 1)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Recover(dir, time.Now()); err == nil || !strings.Contains(err.Error(), "in use by a running tessera daemon") {
		t.Errorf("Recover on a held database = %v", err)
	}
}

// A crash between a commit and its mirror leaves a stale mirror; Open
// brings it up to date.
func TestOpenRefreshesStaleMirrors(t *testing.T) {
	dir := newState(t, 1)
	p := filepath.Join(JobDir(dir, "job-1"), RecordFile)
	must(t, os.WriteFile(p, []byte(`{"id":"job-1","seq":1,"state":"queued"}`), 0o600))
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	j, err := readMirror(JobDir(dir, "job-1"))
	if err != nil || j.State != api.Failed {
		t.Errorf("mirror after Open = %s, %v; want failed", j.State, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
