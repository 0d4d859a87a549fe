package setup

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
)

// The simulated meter reads each container's declared load from its pod
// (once), runs it from the allocation's creation, labels its readings
// simulated, and runs nothing for a container without a load or whose pod
// cannot be read yet (until a later Refresh reads it).
func TestSimMeter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	allocs := []checkpoint.Entry{
		{Key: "k-train", Namespace: "ml", Pod: "train", Container: "main", Created: t0},
		{Key: "k-side", Namespace: "ml", Pod: "train", Container: "side", Created: t0},
		{Key: "k-late", Namespace: "ml", Pod: "late", Container: "main", Created: t0},
	}
	reads := map[string]int{}
	lateReady := false
	m := &SimMeter{
		allocs: func() []checkpoint.Entry { return allocs },
		env: func(_ context.Context, ns, pod string) (map[string]string, bool, error) {
			reads[pod]++
			switch {
			case pod == "train":
				return map[string]string{"main": "busy=0.5,memory=4Gi"}, true, nil
			case lateReady:
				return map[string]string{"main": "busy=1"}, true, nil
			}
			return nil, false, errors.New("API server unreachable")
		},
		now: func() time.Time { return now },
		log: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	m.Refresh(ctx)
	keys := []string{"k-train", "k-side", "k-late"}
	if r, _ := m.Read(ctx, "G0", keys); !r.Simulated || r.Span != 0 {
		t.Fatalf("first reading = %+v, want an empty simulated one", r)
	}
	now = t0.Add(10 * time.Second)
	r, err := m.Read(ctx, "G0", keys)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated || r.Span != 10*time.Second || r.Busy["k-train"] != 5*time.Second || r.Busy["k-side"] != 0 || r.Busy["k-late"] != 0 {
		t.Errorf("reading = %+v, want simulated 10 s with k-train busy 5 s, others none", r)
	}
	if mem := m.MemoryMiB(); mem["k-train"] != 4096 || len(mem) != 2 {
		t.Errorf("memory = %v, want k-train 4096 MiB and k-side 0 (k-late not read yet)", mem)
	}
	lateReady = true
	m.Refresh(ctx)
	now = t0.Add(20 * time.Second)
	if r, _ := m.Read(ctx, "G0", keys); r.Busy["k-late"] != 10*time.Second {
		t.Errorf("after the pod was read, k-late busy %v, want 10s", r.Busy["k-late"])
	}
	if reads["train"] != 1 {
		t.Errorf("pod train read %d times, want once (its containers' loads are kept)", reads["train"])
	}
	allocs = allocs[:1]
	m.Refresh(ctx)
	if mem := m.MemoryMiB(); len(mem) != 1 {
		t.Errorf("after two containers ended, loads %v, want k-train's only", mem)
	}
}
