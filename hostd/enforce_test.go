package hostd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestArbiterSeat(t *testing.T) {
	arb, err := arbiter.New(arbiter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seat := ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}}
	share := func(uuid string, idx int, milli int64) binding.Share {
		return binding.Share{UUID: uuid, Index: idx, ComputeMilli: milli, ComputeLimitMilli: 1000, MemoryMiB: 1024, MemoryLimitMiB: 1024}
	}
	dir := t.TempDir()
	job := api.Job{ID: "j1", Shares: []binding.Share{share("GPU-b", 1, 600), share("GPU-a", 0, 600)}}
	region, err := seat.Admit(job, dir)
	if err != nil {
		t.Fatal(err)
	}
	if region != filepath.Join(dir, arbiter.RegionFile) {
		t.Fatalf("region = %s", region)
	}
	if _, err := os.Stat(region); err != nil {
		t.Fatalf("no region file: %v", err)
	}
	// Devices are registered in index order: ordinal 0 is GPU-a.
	for _, s := range arb.Snapshot() {
		if (s.Device == 0) != (s.GPU == "GPU-a") {
			t.Errorf("device %d is %s", s.Device, s.GPU)
		}
	}
	// Re-admitting (a re-adopted job) replaces the seat; a second job that
	// would overbook a GPU is refused.
	if _, err := seat.Admit(job, dir); err != nil {
		t.Fatalf("re-admit: %v", err)
	}
	_, err = seat.Admit(api.Job{ID: "j2", Shares: []binding.Share{share("GPU-a", 0, 500)}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "must be at most 1000") {
		t.Fatalf("overbooking: %v", err)
	}
	seat.Release("j1")
	seat.Release("j1") // twice is fine
	if n := len(arb.Snapshot()); n != 0 {
		t.Fatalf("%d seats after release", n)
	}
}
