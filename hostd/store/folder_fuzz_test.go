package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// FuzzJobFolder feeds the state-folder loader (what Recover reads from a
// job folder: record.json, spec.json, exit.json) arbitrary files. It must
// never panic, and the record it returns is always one of this folder's
// job, in a state a job can be in, final with an end time and, when
// rebuilt from an exit status, succeeded exactly when the code is 0.
func FuzzJobFolder(f *testing.F) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	code := 3
	good, _ := json.Marshal(api.Job{ID: "job-7", Seq: 7, Queue: "default", State: api.Failed, ExitCode: &code, Submitted: now, Finished: &now})
	spec, _ := json.Marshal(supervisor.Spec{Command: []string{"/bin/true"}, Dir: "/tmp"})
	exit, _ := json.Marshal(supervisor.Exit{Code: 0, Reason: "exit status 0", Finished: now})
	f.Add(good, spec, exit)
	f.Add([]byte(`{"id":"job-7","seq":99,"state":"running"}`), []byte(`{}`), []byte(`{"code":-1}`))
	f.Add([]byte(`{"id":"job-8","seq":7,"state":"succeeded"}`), []byte(`null`), []byte(`{"code":0,"finished":"x"}`))
	f.Add([]byte(`{"id":"job-7","seq":7,"state":"exploded"}`), []byte(`[`), []byte(`{"code":1}`))
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, record, specData, exitData []byte) {
		stateDir := t.TempDir()
		fo := folder{id: "job-7", seq: 7}
		dir := JobDir(stateDir, fo.id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{RecordFile: record, supervisor.SpecFile: specData, supervisor.ExitFile: exitData} {
			if len(data) == 0 {
				continue // a missing file
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		j, from := loadFolder(stateDir, fo, nil, now)
		if j.ID != fo.id || j.Seq != fo.seq {
			t.Fatalf("record %s (seq %d) for folder %s (seq %d)", j.ID, j.Seq, fo.id, fo.seq)
		}
		if !validRecord(j, fo) {
			t.Fatalf("record in state %q", j.State)
		}
		if from != rebuilt {
			return
		}
		if !j.State.Final() || j.Finished == nil {
			t.Fatalf("rebuilt record %s, finished %v: want a final state with an end time", j.State, j.Finished)
		}
		switch {
		case j.ExitCode == nil:
			if j.State != api.Lost {
				t.Fatalf("rebuilt record without an exit code is %s, want lost", j.State)
			}
		case (*j.ExitCode == 0) != (j.State == api.Succeeded):
			t.Fatalf("rebuilt record with exit code %d is %s", *j.ExitCode, j.State)
		}
	})
}
