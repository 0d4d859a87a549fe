package arbiter

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
)

// TestIdleHolderLendsItsGuarantee drives a holder h (500/500) that
// keeps asking for the GPU (it waits for tokens every period) while its
// readings say it uses 1% of it, beside a borrower b (250, limit 800) and,
// in some cases, c (250/250) holding the rest of the GPU, all busy. Idle
// rule: below 50 thousandths for 1 min, over 10 s use windows. Until h is
// marked idle every client gets its guarantee; from the step that marks
// it, h keeps IdleFloor (100) and b gets its guarantee plus what h lends,
// bounded by its limit; the step whose window shows h at 300 gives h its
// guarantee back and cuts b back. KeepIdleGuarantee lends nothing.
func TestIdleHolderLendsItsGuarantee(t *testing.T) {
	const period = DefaultPeriod
	cases := []struct {
		keep, withC bool
		// idle is the split while h is marked idle; before and after it,
		// every client gets its guarantee (b takes what c leaves).
		guaranteed, idle map[string]int64
	}{
		// b: 250 + (500 - 100) lent = 650, below its limit.
		{false, true, map[string]int64{"h": 500, "b": 250, "c": 250}, map[string]int64{"h": 100, "b": 650, "c": 250}},
		// b: its limit, 800; h: its floor and what b leaves.
		{false, false, map[string]int64{"h": 500, "b": 500}, map[string]int64{"h": 200, "b": 800}},
		{true, true, map[string]int64{"h": 500, "b": 250, "c": 250}, map[string]int64{"h": 500, "b": 250, "c": 250}},
		{true, false, map[string]int64{"h": 500, "b": 500}, map[string]int64{"h": 500, "b": 500}},
	}
	for _, simulated := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("simulated=%v keep=%v c=%v", simulated, tc.keep, tc.withC), func(t *testing.T) {
				busyH := 0.01
				m := &scriptedMeter{script: func(int) (Reading, error) {
					busy := map[string]time.Duration{"h": time.Duration(busyH * float64(period)), "b": period / 2, "c": period / 5}
					return Reading{Span: period, Busy: busy, Simulated: simulated}, nil
				}}
				rule := gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}
				a, clock := newArbiter(t, Config{Meter: m, UseWindow: 10 * time.Second, Idle: rule, KeepIdleGuarantee: tc.keep})
				libs := map[string]*fakeLib{}
				_, libs["h"] = register(t, a, "h", gpuShare("G", 500, 500))
				_, libs["b"] = register(t, a, "b", gpuShare("G", 250, 800))
				if tc.withC {
					_, libs["c"] = register(t, a, "c", gpuShare("G", 250, 250))
				}
				run := func(n int) {
					for range n {
						for _, l := range libs {
							l.launch(0, 1<<40)
						}
						step(t, a, clock)
					}
				}
				check := func(when string, want map[string]int64, lends bool) {
					t.Helper()
					if got := shares(a, "G"); !maps.Equal(got, want) {
						t.Fatalf("%s: shares %v, want %v", when, got, want)
					}
					for _, st := range a.Snapshot() {
						if st.Lends != (lends && st.Key == "h") {
							t.Fatalf("%s: %s lends %v, want %v", when, st.Key, st.Lends, lends && st.Key == "h")
						}
						if st.Measured == simulated {
							t.Fatalf("%s: %s's rate measured %v on a simulated meter %v: simulated readings must not move a rate", when, st.Key, st.Measured, simulated)
						}
					}
				}
				// Windows close every 200 steps (10 s); the one that ends at
				// 60 s completes the idle time.
				run(1199)
				check("a step before the idle time", tc.guaranteed, false)
				if st := seatOf(a, "h"); st.Idle != nil {
					t.Fatalf("a step before the idle time: %+v, want h not idle yet", st)
				}
				run(1)
				if st := seatOf(a, "h"); st.Idle == nil {
					t.Fatalf("at the idle time: %+v, want h idle", st)
				}
				check("at the idle time", tc.idle, !tc.keep)
				busyH = 0.3
				run(199)
				check("h busy, its window still open", tc.idle, !tc.keep)
				run(1)
				check("the step whose window shows h busy", tc.guaranteed, false)
				if !simulated {
					return // measured rates move; the token check below assumes the static rate
				}
				// b was cut back in that step: at most BurstPeriods periods
				// of its share (one period of 1000 thousandths is 1000 tokens
				// at the static rate).
				if got := libs["b"].tokens(0); got > 2*tc.guaranteed["b"] {
					t.Fatalf("b holds %d tokens after the cut, want at most %d", got, 2*tc.guaranteed["b"])
				}
			})
		}
	}
}

// TestIdleHolderKeepsItsFloor checks a holder that launches nothing: its
// unused share goes to b with or without lending (work conservation), but
// the standing balance it keeps to wake with is its guarantee until it is
// marked idle, then one period at its IdleFloor; it stays registered and
// gets its guarantee-sized balance back with the step that ends the mark.
func TestIdleHolderKeepsItsFloor(t *testing.T) {
	const period = DefaultPeriod
	busyH := time.Duration(0)
	m := &scriptedMeter{script: func(int) (Reading, error) {
		return Reading{Span: period, Busy: map[string]time.Duration{"h": busyH, "b": period / 2}, Simulated: true}, nil
	}}
	a, clock := newArbiter(t, Config{Meter: m, UseWindow: 10 * time.Second, Idle: gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}})
	_, h := register(t, a, "h", gpuShare("G", 500, 500))
	_, b := register(t, a, "b", gpuShare("G", 250, 800))
	run := func(n int) {
		for range n {
			b.launch(0, 1<<40)
			step(t, a, clock)
		}
	}
	// Static rate: one period of 1 thousandth is 1 token.
	run(1199)
	if got, sh := h.tokens(0), shares(a, "G"); got != 500 || sh["b"] != 800 || sh["h"] != 0 {
		t.Fatalf("before the idle time: h holds %d tokens, shares %v; want 500 tokens, b 800, h 0", got, sh)
	}
	run(1)
	if got, sh := h.tokens(0), shares(a, "G"); got != 100 || sh["b"] != 800 || !seatOf(a, "h").Lends {
		t.Fatalf("at the idle time: h holds %d tokens, shares %v, %+v; want 100 tokens (its floor), b 800, h lending", got, sh, seatOf(a, "h"))
	}
	busyH = period / 5
	run(200)
	if got := h.tokens(0); got != 500 || seatOf(a, "h").Lends {
		t.Fatalf("after a busy window: h holds %d tokens, %+v; want 500 and no lending", got, seatOf(a, "h"))
	}
}

func seatOf(a *Arbiter, key string) SeatStatus {
	for _, st := range a.Snapshot() {
		if st.Key == key {
			return st
		}
	}
	return SeatStatus{}
}

// TestIdleFloor checks the floor an idle holder keeps: twice the idle
// threshold, never above its guarantee.
func TestIdleFloor(t *testing.T) {
	rule := gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}
	for _, c := range []struct{ g, want int64 }{{500, 100}, {100, 100}, {60, 60}, {1, 1}} {
		if got := IdleFloor(c.g, rule); got != c.want {
			t.Errorf("IdleFloor(%d) = %d, want %d", c.g, got, c.want)
		}
	}
}
