package store

import (
	"errors"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestCreateGetListPersist(t *testing.T) {
	path := t.TempDir()
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a", "b", "c"} {
		if _, err := s.Create(api.Job{Queue: q, State: api.Queued, Command: []string{"/bin/true"}}); err != nil {
			t.Fatal(err)
		}
	}
	j, err := s.Get("job-2")
	if err != nil || j.Queue != "b" || j.Seq != 2 {
		t.Fatalf("Get(job-2) = %+v, %v", j, err)
	}
	code := 3
	j.State, j.ExitCode = api.Failed, &code
	if err := s.Put(j); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if len(jobs) != 3 || ids[0] != "job-1" || ids[2] != "job-3" {
		t.Fatalf("List after reopen = %v", ids)
	}
	if jobs[1].State != api.Failed || jobs[1].ExitCode == nil || *jobs[1].ExitCode != 3 {
		t.Errorf("job-2 after reopen = %+v", jobs[1])
	}
	if j, _ := s.Create(api.Job{}); j.ID != "job-4" {
		t.Errorf("sequence after reopen: got %s, want job-4", j.ID)
	}
}

func TestErrors(t *testing.T) {
	path := t.TempDir()
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name string
		err  error
	}{
		{"get unknown", func() error { _, err := s.Get("job-9"); return err }()},
		{"put unknown", s.Put(api.Job{ID: "job-9"})},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tt.name, tt.err)
		}
	}
	if _, err := Open(path, nil); err == nil {
		t.Error("second Open of a held store succeeded")
	}
}
