package hostd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// A NUL byte in an argument, an environment entry or the working folder,
// and a working folder that is missing or not a folder, are refused at
// submission naming the field (and the index), not at start; nothing is
// queued.
func TestSubmitRefusesWhatCannotStart(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "1xH200")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	one := map[string]string{"count": "1"}
	tests := []struct {
		name  string
		req   api.SubmitRequest
		field string
		want  []string
	}{
		{"NUL in an argument", api.SubmitRequest{GPU: one, Command: []string{"/bin/echo", "a", "b\x00c"}},
			"command[2]", []string{"command[2]: contains a NUL byte (at byte 1)"}},
		{"NUL in the program", api.SubmitRequest{GPU: one, Command: []string{"/bin/true\x00x"}},
			"command[0]", []string{"command[0]: contains a NUL byte (at byte 9)"}},
		{"NUL in the environment", api.SubmitRequest{GPU: one, Command: []string{"/bin/true"}, Env: []string{"A=1", "SECRET=ab\x00cd"}},
			"env[1]", []string{"env[1]: contains a NUL byte (at byte 9)"}},
		{"NUL in the folder", api.SubmitRequest{GPU: one, Command: []string{"/bin/true"}, Dir: "/tmp\x00x"},
			"dir", []string{"dir: contains a NUL byte (at byte 4)"}},
		{"missing folder", api.SubmitRequest{GPU: one, Command: []string{"/bin/true"}, Dir: missing},
			"dir", []string{"dir: the job's working folder " + missing + " does not exist"}},
		{"folder is a file", api.SubmitRequest{GPU: one, Command: []string{"/bin/true"}, Dir: file},
			"dir", []string{"dir: the job's working folder " + file + " is not a folder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Submit(tt.req)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("err = %v, want an InputError on field %q", err, tt.field)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
			for _, secret := range []string{"ab\x00cd", "cd"} {
				if tt.field == "env[1]" && strings.Contains(err.Error(), secret) {
					t.Errorf("err %q quotes the environment entry", err)
				}
			}
		})
	}
	if jobs, _ := d.Jobs(); len(jobs) != 0 {
		t.Errorf("refused submissions queued %d jobs", len(jobs))
	}
}

// A working folder that vanishes between submission and start: the job
// fails, and its reason says the folder is missing.
func TestWorkingFolderGoneAtStart(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH200")
	first, err := d.Submit(gatedJob(gates, map[string]string{"count": "1"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	second, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"/bin/true"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, first.ID+" running", func() bool { return states(t, d)[first.ID] == api.Running })
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	openGate(t, gates, first.ID, 0)
	eventually(t, second.ID+" ended", func() bool { return states(t, d)[second.ID].Final() })
	j, err := d.Job(second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.Failed || !strings.Contains(j.Reason, "the job's working folder "+dir+" does not exist") {
		t.Errorf("%s: %s (%q), want failed saying the working folder %s does not exist", j.ID, j.State, j.Reason, dir)
	}
}
