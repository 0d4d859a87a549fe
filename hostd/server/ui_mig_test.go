package server

import (
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/webui"
)

// The host dashboard shows a MIG GPU's instances as the daemon's status
// lists them: the one created for a running job in use, the operator's
// free.
func TestHostSnapshotMIG(t *testing.T) {
	in := hostState{Now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Status: api.Status{Source: "nvml", GPUs: []api.GPUStatus{
		{Node: "h", Index: 0, UUID: "GPU-a", Model: "H100-SXM", MemoryMiB: 81559, FreeMemoryMiB: 41111, FreeFraction: 0.57, MIG: []api.MIGInstanceStatus{
			{Profile: "3g.40gb", Start: 0, UUID: "MIG-created", MemoryMiB: 40448, InUse: true, Job: "job-1"},
			{Profile: "1g.10gb", Start: 6, UUID: "MIG-operator", MemoryMiB: 9984},
		}},
		{Node: "h", Index: 1, UUID: "GPU-b", Model: "H100-SXM", MemoryMiB: 81559, FreeMemoryMiB: 81559, FreeFraction: 1},
	}}}
	s := hostSnapshot(in)
	want := []webui.MIGInstance{{Profile: "3g.40gb", UUID: "MIG-created", MemoryMiB: 40448, InUse: true}, {Profile: "1g.10gb", UUID: "MIG-operator", MemoryMiB: 9984}}
	if got := s.GPUs[0].MIG; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("GPU 0's instances %+v, want %+v", got, want)
	}
	if s.GPUs[1].MIG != nil {
		t.Errorf("GPU 1 (not in MIG mode) lists instances %+v", s.GPUs[1].MIG)
	}
}
