package usepub

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
)

var t0 = time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)

func ptr(v int64) *int64 { return &v }

func entry(key, pod, ctr string, shares ...binding.Share) checkpoint.Entry {
	return checkpoint.Entry{Key: key, Namespace: "ns", Pod: pod, Container: ctr, GPUs: shares}
}

func share(uuid string, idx int, g, l, mem int64) binding.Share {
	return binding.Share{UUID: uuid, Index: idx, ComputeMilli: g, ComputeLimitMilli: l, MemoryMiB: mem, MemoryLimitMiB: mem}
}

func used(src gpuuse.Source, busy int64) gpuuse.Use {
	return gpuuse.Use{Source: src, BusyMilli: ptr(busy), From: t0.Add(-10 * time.Second), At: t0}
}

func TestRecords(t *testing.T) {
	inv := inventory.Node{Name: "n1", Source: "sim", GPUs: []inventory.GPU{{UUID: "G0", Index: 0}, {UUID: "G1", Index: 1}, {UUID: "G2", Index: 2}}}
	allocs := []checkpoint.Entry{
		entry("k-a", "a", "main", share("G0", 0, 300, 600, 1000)),
		// Pod b: two containers on G0 (one idle, one not), one on G1.
		entry("k-b1", "b", "one", share("G0", 0, 200, 200, 500)),
		entry("k-b2", "b", "two", share("G0", 0, 100, 400, 500), share("G1", 1, 500, 1000, 2000)),
		entry("k-c", "c", "main", share("G1", 1, 200, 200, 100)), // no seat
	}
	seats := []arbiter.SeatStatus{
		{Key: "k-a", GPU: "G0", Use: used(gpuuse.Simulated, 250)},
		{Key: "k-b1", GPU: "G0", Use: used(gpuuse.Simulated, 10), Idle: &gpuuse.Idle{Since: t0.Add(-time.Hour)}},
		{Key: "k-b2", GPU: "G0", Use: used(gpuuse.Simulated, 20)},
		{Key: "k-b2", GPU: "G1", Use: used(gpuuse.Simulated, 5), Idle: &gpuuse.Idle{Since: t0.Add(-20 * time.Minute)}},
	}
	n := Node{Inventory: inv, Allocations: allocs, Seats: seats, Window: 10 * time.Second, Rule: gpuuse.IdleRule{}.WithDefaults(), Metered: true,
		SimMemoryMiB: map[string]int64{"k-a": 700}}
	st := Records(n, t0)
	if st.Source != "sim" || !st.At.Equal(t0) || !st.Rule.Metered || st.Rule.WindowSeconds != 10 || len(st.GPUs) != 3 {
		t.Fatalf("status = %+v", st)
	}
	g0, g1, g2 := st.GPUs[0], st.GPUs[1], st.GPUs[2]
	if len(g0.Shares) != 2 || g0.Shares[0].Workload != "ns/a" || g0.Shares[1].Workload != "ns/b" {
		t.Fatalf("G0 shares = %+v, want ns/a and ns/b", g0.Shares)
	}
	a, b := g0.Shares[0], g0.Shares[1]
	if a.Use.Source != gpuuse.Simulated || *a.Use.BusyMilli != 250 || a.Use.MemoryUsedMiB == nil || *a.Use.MemoryUsedMiB != 700 || a.Idle != nil {
		t.Errorf("ns/a on G0 = %+v, want simulated 250 milli, 700 MiB, not idle", a)
	}
	if b.Booked.GuaranteedMilli != 300 || b.Booked.LimitMilli != 600 || *b.Use.BusyMilli != 30 || b.Idle != nil {
		t.Errorf("ns/b on G0 = %+v, want its containers summed (300/600, 30 milli), not idle (one container is busy)", b)
	}
	if *g0.Use.BusyMilli != 280 || g0.Use.Source != gpuuse.Simulated || g0.Booked.GuaranteedMilli != 600 {
		t.Errorf("G0 = %+v, want 280 milli simulated, 600 guaranteed", g0)
	}
	if len(g1.Shares) != 2 {
		t.Fatalf("G1 shares = %+v", g1.Shares)
	}
	if b1, c := g1.Shares[0], g1.Shares[1]; b1.Idle == nil || !b1.Idle.Since.Equal(t0.Add(-20*time.Minute)) || c.Use.Source != gpuuse.None || !strings.Contains(c.Use.Reason, "no seat") {
		t.Errorf("G1 = %+v, want ns/b idle since -20m, ns/c not metered (no seat)", g1.Shares)
	}
	if g2.Use.Source != gpuuse.None || !strings.Contains(g2.Use.Reason, "no pod holds it") || len(g2.Shares) != 0 {
		t.Errorf("G2 = %+v, want not metered: no pod holds it", g2)
	}
}

func TestRecordsNotMetered(t *testing.T) {
	inv := inventory.Node{Name: "n1", Source: "nvml", GPUs: []inventory.GPU{{UUID: "G0"}}}
	allocs := []checkpoint.Entry{entry("k", "p", "main", share("G0", 0, 500, 500, 100))}
	seats := []arbiter.SeatStatus{{Key: "k", GPU: "G0"}}
	for _, c := range []struct {
		name string
		n    Node
		want string
	}{
		{"mps", Node{MPS: true, Metered: true}, "MPS"},
		{"no meter", Node{}, "no GPU utilisation meter"},
		{"no window yet", Node{Metered: true, Window: 10 * time.Second}, "not measured yet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.n.Inventory, c.n.Allocations, c.n.Seats = inv, allocs, seats
			c.n.MemoryMiB = map[[2]string]int64{{"k", "G0"}: 64}
			st := Records(c.n, t0)
			s := st.GPUs[0].Shares[0]
			if s.Use.Source != gpuuse.None || !strings.Contains(s.Use.Reason, c.want) {
				t.Errorf("use = %+v, want none saying %q", s.Use, c.want)
			}
			if s.Use.MemoryUsedMiB == nil || *s.Use.MemoryUsedMiB != 64 {
				t.Errorf("memory in use = %v, want the library's 64 MiB (it needs no meter)", s.Use.MemoryUsedMiB)
			}
		})
	}
}
