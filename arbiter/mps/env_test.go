package mps

import (
	"maps"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
)

func TestThreadPercentage(t *testing.T) {
	cases := []struct {
		limit int64
		want  int
	}{{1, 1}, {10, 1}, {11, 2}, {250, 25}, {255, 26}, {999, 100}, {1000, 100}}
	for _, c := range cases {
		got, err := ThreadPercentage(c.limit)
		if err != nil || got != c.want {
			t.Errorf("ThreadPercentage(%d) = %d, %v; want %d", c.limit, got, err, c.want)
		}
	}
	for _, bad := range []int64{0, -5, 1001} {
		if _, err := ThreadPercentage(bad); err == nil || !strings.Contains(err.Error(), "must be in [1, 1000]") {
			t.Errorf("ThreadPercentage(%d): err = %v", bad, err)
		}
	}
}

func TestClientEnv(t *testing.T) {
	s := binding.Share{UUID: gpuA, ComputeMilli: 200, ComputeLimitMilli: 450, MemoryMiB: 8192, MemoryLimitMiB: 10240}
	got, err := ClientEnv("/run/tessera/mps/"+gpuA+"/pipe", s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CUDA_MPS_PIPE_DIRECTORY":           "/run/tessera/mps/" + gpuA + "/pipe",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "45",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=10240M",
	}
	if !maps.Equal(got, want) {
		t.Errorf("ClientEnv = %v, want %v", got, want)
	}
	cases := []struct {
		name string
		dir  string
		s    binding.Share
		want string
	}{
		{"no pipe dir", "", s, "pipe dir: must be set"},
		{"no limit", "/p", binding.Share{UUID: gpuA, MemoryLimitMiB: 1}, "compute limit: must be in [1, 1000]"},
		{"no memory limit", "/p", binding.Share{UUID: gpuA, ComputeLimitMilli: 500}, "memory limit: must be at least 1 MiB"},
	}
	for _, c := range cases {
		if _, err := ClientEnv(c.dir, c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}
