package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// tessera ps --gpus prints each GPU's use beside its booking, labelled by
// its source, and under it each job's booking, use and idle mark; -o json
// carries the same records.
func TestWriteHostGPUsUse(t *testing.T) {
	busy, mem := int64(300), int64(8192)
	since := time.Date(2026, 5, 1, 10, 0, 0, 0, time.Local)
	use := gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy, MemoryUsedMiB: &mem}
	st := api.Status{Source: "sim:2xH200", Simulated: true, Running: 1,
		Use: &api.UseRule{WindowSeconds: 10, IdleBelowMilli: 50, IdleAfterSeconds: 600},
		GPUs: []api.GPUStatus{
			{Node: "h", Index: 0, UUID: "GPU-a", Model: "H200", MemoryMiB: 143771, FreeMemoryMiB: 102811, FreeFraction: 0.5, Jobs: []string{"job-1"}, Use: &use,
				Shares: []gpuuse.Share{{Workload: "job-1", GPU: "GPU-a", Booked: gpuuse.Booked{GuaranteedMilli: 500, LimitMilli: 800, MemoryMiB: 40960, MemoryLimitMiB: 61440}, Use: use, Idle: &gpuuse.Idle{Since: since}}}},
			{Node: "h", Index: 1, UUID: "GPU-b", Model: "H200", MemoryMiB: 143771, FreeMemoryMiB: 143771, FreeFraction: 1, Use: &gpuuse.Use{Source: gpuuse.None, Reason: "not metered: no job runs on it"}},
		}}
	var b strings.Builder
	if err := writeHostGPUs(&b, st); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	for i, want := range map[int][]string{
		0: {"USED"},
		1: {"GPU-a", "0.3 simulated", "job-1"},
		2: {"job-1", "booked 0.5/0.8", "8 GiB / cap 60 GiB", "0.3 simulated, idle since 10:00"},
		3: {"GPU-b", "not metered: no job runs on it"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q (output:\n%s)", i, lines[i], w, b.String())
			}
		}
	}
	if strings.Contains(b.String(), "measured") {
		t.Errorf("simulated use printed as measured:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "idle holder: below 0.05 for 10m0s") {
		t.Errorf("no idle rule line:\n%s", b.String())
	}
	var j bytes.Buffer
	if err := writeStructured(&j, "json", st); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"source": "simulated"`, `"busyMilli": 300`, `"guaranteedMilli": 500`, `"idle": {`, `"idleAfterSeconds": 600`} {
		if !strings.Contains(j.String(), w) {
			t.Errorf("-o json lacks %s:\n%s", w, j.String())
		}
	}
}
