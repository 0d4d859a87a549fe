package cli

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// tessera ps --gpus prints a MIG GPU's instances under it: the one a job
// holds in use with the job, a free one free.
func TestWriteHostGPUsMIG(t *testing.T) {
	st := api.Status{Source: "nvml", Running: 1, GPUs: []api.GPUStatus{{Node: "h", Index: 0, UUID: "GPU-a", Model: "H100-SXM", MemoryMiB: 81559, FreeMemoryMiB: 41111, FreeFraction: 0.57, Jobs: []string{"job-1"},
		MIG: []api.MIGInstanceStatus{
			{Profile: "3g.40gb", Start: 0, UUID: "MIG-created", MemoryMiB: 40448, InUse: true, Job: "job-1"},
			{Profile: "1g.10gb", Start: 6, UUID: "MIG-operator", MemoryMiB: 9984},
		}}}}
	var b strings.Builder
	if err := writeHostGPUs(&b, st); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 {
		t.Fatalf("output %q", b.String())
	}
	for i, want := range map[int][]string{1: {"MIG 3g.40gb@0", "in use", "job-1", "MIG-created"}, 2: {"MIG 1g.10gb@6", "free", "MIG-operator"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %d %q lacks %q (output:\n%s)", i+1, lines[i+1], w, b.String())
			}
		}
	}
	if strings.Contains(lines[3], "job-1") {
		t.Errorf("the free instance's line names a job: %q", lines[3])
	}
}
