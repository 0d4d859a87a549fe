package cli

import (
	"io"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestRunFields(t *testing.T) {
	a := &app{stdout: io.Discard, stderr: io.Discard, catalog: catalog.Default()}
	tests := []struct {
		name    string
		args    []string
		want    map[string]string
		wantErr string
	}{
		{"default one whole GPU", nil, map[string]string{"count": "1"}, ""},
		{"fraction and limit", []string{"--gpu-fraction", "0.25", "--gpu-limit", "80%"}, map[string]string{"count": "1", "compute": "0.25", "compute-limit": "80%"}, ""},
		{"memory and model", []string{"--gpus", "2", "--gpu-memory", "20Gi", "--gpu-memory-limit", "30Gi", "--model", "H200"}, map[string]string{"count": "2", "memory": "20Gi", "memory-limit": "30Gi", "model": "H200"}, ""},
		{"fraction zero", []string{"--gpu-fraction", "0"}, nil, `--gpu-fraction: must be a share in (0, 1]`},
		{"limit below request", []string{"--gpu-fraction", "0.5", "--gpu-limit", "0.25"}, nil, `--gpu-limit: must be in [0.5, 1]`},
		{"zero GPUs", []string{"--gpus", "0"}, nil, `--gpus: must be a whole number in [1, 16], got "0"`},
		{"too many GPUs", []string{"--gpus", "17"}, nil, `--gpus: must be a whole number in [1, 16]`},
		{"bad memory", []string{"--gpu-memory", "lots"}, nil, `--gpu-memory: must be a size such as 20Gi`},
		{"memory limit below memory", []string{"--gpu-memory", "20Gi", "--gpu-memory-limit", "10Gi"}, nil, `--gpu-memory-limit: must be in [20Gi`},
		{"unknown model", []string{"--model", "Z9000"}, nil, `--model: must be a model from`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRunCommand(a)
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := runFields(cmd.Flags(), a)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("runFields = %v, %v; want %v", got, err, tt.want)
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
