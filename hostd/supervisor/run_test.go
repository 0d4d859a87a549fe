package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRecordsExit(t *testing.T) {
	tests := []struct {
		name   string
		cmd    []string
		code   int
		reason string
		stdout string
	}{
		{"success", []string{"/bin/sh", "-c", "echo hi"}, 0, "exit status 0", "hi\n"},
		{"exit code", []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, 4, "exit status 4", "out\n"},
		{"killed by a signal", []string{"/bin/sh", "-c", "kill -KILL $$"}, 128 + 9, "killed by signal 9", ""},
		{"cannot start", []string{"/nonexistent/program"}, 127, "cannot start", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteJSON(filepath.Join(dir, SpecFile), Spec{Command: tt.cmd, Env: []string{"PATH=/usr/bin:/bin"}}); err != nil {
				t.Fatal(err)
			}
			if code := Run(dir); code != 0 {
				t.Fatalf("Run = %d, want 0 (the job's exit is recorded, not returned)", code)
			}
			e, ok, err := ReadExit(dir)
			if err != nil || !ok {
				t.Fatalf("ReadExit = %v, %v", ok, err)
			}
			if e.Code != tt.code || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("exit = %+v, want code %d reason %q", e, tt.code, tt.reason)
			}
			out, _ := os.ReadFile(filepath.Join(dir, StdoutFile))
			if string(out) != tt.stdout {
				t.Errorf("stdout.log = %q, want %q", out, tt.stdout)
			}
		})
	}
}

func TestRunBadSpec(t *testing.T) {
	tests := []struct {
		name string
		spec string
	}{
		{"missing", ""},
		{"not JSON", "{"},
		{"empty command", `{"command":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.spec != "" {
				if err := os.WriteFile(filepath.Join(dir, SpecFile), []byte(tt.spec), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := run(dir); err == nil {
				t.Error("run accepted a bad spec")
			}
			if _, ok, _ := ReadExit(dir); ok {
				t.Error("an exit was recorded for a job that never ran")
			}
		})
	}
}
