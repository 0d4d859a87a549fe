package cli

import (
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// runFields passes the GPU flags to the daemon as given: it checks them
// against this host's GPUs (TestRunBadInputInHostWords).
func TestRunFields(t *testing.T) {
	a := &app{stdout: io.Discard, stderr: io.Discard, catalog: catalog.Default()}
	tests := []struct {
		name string
		args []string
		want map[string]string
	}{
		{"default one whole GPU", nil, map[string]string{"count": "1"}},
		{"fraction and limit", []string{"--gpu-fraction", "0.25", "--gpu-limit", "80%"}, map[string]string{"count": "1", "compute": "0.25", "compute-limit": "80%"}},
		{"memory and model", []string{"--gpus", "2", "--gpu-memory", "20Gi", "--gpu-memory-limit", "30Gi", "--model", "H200"}, map[string]string{"count": "2", "memory": "20Gi", "memory-limit": "30Gi", "model": "H200"}},
		{"count kept as given", []string{"--gpus", "x"}, map[string]string{"count": "x"}},
		{"mig", []string{"--mig", "1g.18gb"}, map[string]string{"count": "1", "mig-profile": "1g.18gb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRunCommand(a)
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			if got := runFields(cmd.Flags()); !maps.Equal(got, tt.want) {
				t.Fatalf("runFields = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestHostFlagsResolve(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name              string
		flags             hostFlags
		envState, envSock string
		wantState, wantSk string
	}{
		{"flags win", hostFlags{stateDir: dir + "/a", socket: dir + "/s.sock"}, dir + "/env", dir + "/env.sock", dir + "/a", dir + "/s.sock"},
		{"env", hostFlags{}, dir + "/env", dir + "/env.sock", dir + "/env", dir + "/env.sock"},
		{"socket defaults into the state dir", hostFlags{stateDir: dir + "/b"}, "", "", dir + "/b", dir + "/b/tessera.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envStateDir, tt.envState)
			t.Setenv(envSocket, tt.envSock)
			st, sk, err := tt.flags.resolve()
			if err != nil || st != filepath.Clean(tt.wantState) || sk != filepath.Clean(tt.wantSk) {
				t.Errorf("resolve = %q, %q, %v; want %q, %q", st, sk, err, tt.wantState, tt.wantSk)
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9400", true}, {"[::1]:9400", true}, {"localhost:9400", true},
		{"0.0.0.0:9400", false}, {":9400", false}, {"10.0.0.1:80", false}, {"nonsense", false},
	}
	for _, tt := range tests {
		if err := checkLoopback(tt.addr); (err == nil) != tt.ok {
			t.Errorf("checkLoopback(%q) = %v, want ok %v", tt.addr, err, tt.ok)
		}
	}
}

func TestJobExit(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name string
		job  api.Job
		want int
	}{
		{"success", api.Job{State: api.Succeeded, ExitCode: code(0)}, 0},
		{"failure", api.Job{State: api.Failed, ExitCode: code(3)}, 3},
		{"signal", api.Job{State: api.Stopped, ExitCode: code(143)}, 143},
		{"stopped while queued", api.Job{State: api.Stopped}, 1},
		{"lost", api.Job{State: api.Lost}, 1},
	}
	for _, tt := range tests {
		err := jobExit(tt.job)
		got := 0
		if ee, ok := err.(*exitError); ok {
			got = ee.code
		}
		if got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Issue #34 (1): tessera run sends the job only the base variables and
// those asked for, never TESSERA_TOKEN.
func TestJobEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/home/a", "LC_ALL=C", "AWS_SECRET_ACCESS_KEY=x", "TESSERA_TOKEN=t", "GATE=/tmp/g", "EMPTY=", "odd"}
	for _, tc := range []struct {
		name    string
		entries []string
		all     bool
		want    []string
		err     string
	}{
		{name: "base only", want: []string{"PATH=/bin", "HOME=/home/a", "LC_ALL=C"}},
		{name: "asked by name and set", entries: []string{"GATE", "MODE=fast", "PATH=/opt/bin", "EMPTY"},
			want: []string{"PATH=/opt/bin", "HOME=/home/a", "LC_ALL=C", "GATE=/tmp/g", "MODE=fast", "EMPTY="}},
		{name: "everything", all: true, want: []string{"PATH=/bin", "HOME=/home/a", "LC_ALL=C", "AWS_SECRET_ACCESS_KEY=x", "GATE=/tmp/g", "EMPTY="}},
		{name: "unset name", entries: []string{"NOPE"}, err: "--env: NOPE is not set in this environment"},
		{name: "the token", entries: []string{"TESSERA_TOKEN"}, err: "--env: TESSERA_TOKEN is never passed"},
		{name: "no name", entries: []string{"=x"}, err: `--env: must be NAME or NAME=VALUE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jobEnv(environ, tc.entries, tc.all)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("jobEnv = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
