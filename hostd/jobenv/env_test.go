package jobenv

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
)

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m["DUPLICATE"] = k
		}
		m[k] = v
	}
	return m
}

func TestBuild(t *testing.T) {
	shares := []binding.Share{
		{UUID: "GPU-b", Index: 1, ComputeMilli: 500, ComputeLimitMilli: 800, MemoryMiB: 1024, MemoryLimitMiB: 2048},
		{UUID: "GPU-a", Index: 0, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryMiB: 1024, MemoryLimitMiB: 1024},
	}
	tests := []struct {
		name   string
		base   []string
		shares []binding.Share
		o      Options
		want   map[string]string
		absent []string
	}{
		{
			name:   "two shares, index order, fail-open without arbiter",
			base:   []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=all", "TESSERA_ARBITER_REGION=/stale"},
			shares: shares,
			o:      Options{JobID: "job-1", Queue: "default", ShmDir: "/state/jobs/job-1/shm"},
			want: map[string]string{
				"PATH":                    "/bin",
				"CUDA_VISIBLE_DEVICES":    "GPU-a,GPU-b",
				"NVIDIA_VISIBLE_DEVICES":  "GPU-a,GPU-b",
				"TESSERA_GPU_UUIDS":       "GPU-a,GPU-b",
				"CUDA_DEVICE_ORDER":       "PCI_BUS_ID",
				"TESSERA_CONTAINER_ID":    "job-1",
				"TESSERA_JOB_ID":          "job-1",
				"TESSERA_QUEUE":           "default",
				"TESSERA_COMPUTE_REQUEST": "500m,500m",
				"TESSERA_COMPUTE_LIMIT":   "500m,800m",
				"TESSERA_MEMORY_REQUEST":  "1024Mi,1024Mi",
				"TESSERA_MEMORY_LIMIT":    "1024Mi,2048Mi",
				"TESSERA_SHM_DIR":         "/state/jobs/job-1/shm",
				"TESSERA_COMPUTE_FAIL":    "open",
				"TESSERA_OVERSUBSCRIBE":   "0",
			},
			absent: []string{"LD_PRELOAD", "TESSERA_ARBITER_REGION", "DUPLICATE"},
		},
		{
			name:   "intercept library prepended, arbiter region set",
			base:   []string{"LD_PRELOAD=/lib/other.so"},
			shares: shares[:1],
			o:      Options{JobID: "job-2", InterceptLib: "/x/libtessera-intercept.so", ArbiterRegion: "/s/grant", ComputeFail: "closed"},
			want: map[string]string{
				"LD_PRELOAD":             "/x/libtessera-intercept.so /lib/other.so",
				"CUDA_VISIBLE_DEVICES":   "GPU-b",
				"TESSERA_ARBITER_REGION": "/s/grant",
				"TESSERA_COMPUTE_FAIL":   "closed",
			},
			absent: []string{"DUPLICATE"},
		},
		{
			name:   "arbiter's client variables over the base, never over the daemon's own",
			base:   []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", "LD_PRELOAD=/lib/other.so"},
			shares: shares[1:],
			o: Options{JobID: "job-4", ClientEnv: map[string]string{
				"CUDA_MPS_PIPE_DIRECTORY": "/mps/GPU-a/pipe", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "45", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M",
				"CUDA_VISIBLE_DEVICES": "GPU-x", "TESSERA_JOB_ID": "job-x", "LD_PRELOAD": "/x.so",
			}},
			want: map[string]string{
				"CUDA_MPS_PIPE_DIRECTORY":           "/mps/GPU-a/pipe",
				"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "45",
				"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=1024M",
				"CUDA_VISIBLE_DEVICES":              "GPU-a",
				"TESSERA_JOB_ID":                    "job-4",
				"LD_PRELOAD":                        "/lib/other.so",
			},
			absent: []string{"DUPLICATE"},
		},
		{
			name: "no GPUs",
			o:    Options{JobID: "job-3"},
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "void", "TESSERA_GPU_UUIDS": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := envMap(Build(tt.base, tt.shares, tt.o))
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tt.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s set to %q, want unset", k, v)
				}
			}
		})
	}
}

func TestBuildMIG(t *testing.T) {
	shares := []binding.Share{
		{UUID: "MIG-GPU-b/0", Index: 1, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 16384, MemoryLimitMiB: 16384, MIGProfile: "1g.18gb"},
		{UUID: "MIG-GPU-a/3", Index: 0, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 16384, MemoryLimitMiB: 16384, MIGProfile: "1g.18gb"},
	}
	env := envMap(Build([]string{"TESSERA_MIG_PROFILES=stale"}, shares, Options{JobID: "job-1", GPUUUIDs: map[int]string{0: "GPU-a", 1: "GPU-b"}}))
	for k, want := range map[string]string{
		"CUDA_VISIBLE_DEVICES":     "MIG-GPU-a/3,MIG-GPU-b/0",
		"TESSERA_MIG_PROFILES":     "1g.18gb,1g.18gb",
		"TESSERA_MIG_PARENT_UUIDS": "GPU-a,GPU-b",
		"TESSERA_MEMORY_LIMIT":     "16384Mi,16384Mi",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	plain := envMap(Build([]string{"TESSERA_MIG_PROFILES=stale"}, shares[:0], Options{JobID: "job-2"}))
	if _, ok := plain["TESSERA_MIG_PROFILES"]; ok || plain["DUPLICATE"] != "" {
		t.Errorf("a job without MIG instances has MIG variables: %v", plain)
	}
}
