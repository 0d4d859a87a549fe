package hostd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

func TestParseConfig(t *testing.T) {
	s, err := ParseConfig([]byte(`
queues:
  - name: research
    guaranteed: {gpu: 1, gpuMemory: 80Gi}
    weight: 2
  - name: batch
    parent: research
    priority: -5
    limit: {gpu: "0.5"}
    idleReclaimAfter: 2h
preemption:
  minRuntime: 90s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []queueing.Queue{
		{Name: "research", Weight: 2, Guaranteed: queueing.Resources{GPUMilli: 1000, GPUMemoryMiB: 80 * 1024}},
		{Name: "batch", Parent: "research", Priority: -5, Limit: queueing.Resources{GPUMilli: 500}, IdleReclaimAfter: 2 * time.Hour},
	}
	if len(s.Queues) != 2 || s.Queues[0] != want[0] || s.Queues[1] != want[1] {
		t.Errorf("queues = %+v\nwant %+v", s.Queues, want)
	}
	if s.MinRuntime == nil || *s.MinRuntime != 90*time.Second || s.DisablePreemption {
		t.Errorf("preemption = %v, %v", s.MinRuntime, s.DisablePreemption)
	}
	if s, err := ParseConfig([]byte("preemption: {disabled: true}\n")); err != nil || !s.DisablePreemption || s.MinRuntime != nil || len(s.Queues) != 0 {
		t.Errorf("preemption only: %+v, %v", s, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		yaml string
		want string
	}{
		{"queues:\n  - name: Research\n", `queues[0].name: must be a lowercase DNS label (a-z, 0-9, '-', '.', at most 63), got "Research"`},
		{"queues:\n  - name: a\n  - name: b\n    weight: -1\n", "queues[1].weight: must be in [0, 2147483647] (0 means 1), got -1"},
		{"queues:\n  - name: a\n    guaranteed: {gpu: lots}\n", `queues[0].guaranteed.gpu: must be a number of GPUs such as 4 or 0.5, got "lots"`},
		{"queues:\n  - name: a\n    limit: {gpuMemory: 1TB}\n", `queues[0].limit.gpuMemory: must be a size such as 320Gi, got "1TB"`},
		{"queues:\n  - name: a\n    guaranteed: {gpu: 2}\n    limit: {gpu: 1}\n", "queues[0].guaranteed: must be within queues[0].limit"},
		{"queues:\n  - name: a\n    parent: nope\n", `queue a: parent "nope" is not defined`},
		{"queues:\n  - name: a\n  - name: a\n", `queues[1].name: "a" is defined twice`},
		{"queues:\n  - name: a\n    gurantee: {gpu: 1}\n", `unknown field "gurantee"`},
		{"preemption:\n  minRuntime: soon\n", `preemption.minRuntime: must be a duration >= 0 such as 90s or 5m, got "soon"`},
		{"preemption:\n  minRuntime: -1m\n", `preemption.minRuntime: must be a duration >= 0`},
		{"queues: {name: a}\n", "parse:"},
		{"queues:\n  - name: a\n    idleReclaimAfter: 10m\n", "queues[0].idleReclaimAfter: must be 0 (off) or in [30m, 168h], got 10m0s"},
	}
	for _, tt := range tests {
		if _, err := ParseConfig([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseConfig(%q) = %v\nwant %q", tt.yaml, err, tt.want)
		}
	}
}

func TestLoadConfigFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tessera.yaml")
	if err := os.WriteFile(path, []byte("queues:\n  - name: a\n    weight: -3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(path); err == nil || !strings.Contains(err.Error(), "config "+path+": queues[0].weight") {
		t.Errorf("err = %v", err)
	}
	if _, err := LoadConfigFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// The daemon refuses queues it could never honour.
func TestNewRejectsBadQueues(t *testing.T) {
	for _, tc := range []struct {
		qs   []queueing.Queue
		want string
	}{
		{[]queueing.Queue{{Name: "big", Guaranteed: queueing.Resources{GPUMilli: 3000}}}, "queues[0].guaranteed.gpu: must be at most this host's 2 GPUs, got 3"},
		{[]queueing.Queue{{Name: "a", Parent: "b"}}, `queues: queue a: parent "b" is not defined`},
	} {
		cfg := testConfig(t, t.TempDir(), "2xH200")
		cfg.Queues = tc.qs
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want %q", err, tc.want)
		}
	}
}
