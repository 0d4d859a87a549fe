package arbiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/demand"
	"github.com/tessera-gpu/tessera/gpuuse"
)

// TestStepProperties registers random clients on two GPUs and drives them
// with seeded random activity; after every step, on every shared GPU:
// shares stay within limits and sum to at most 1000, busy clients get their
// guarantee, the GPU is fully handed out when a busy client is below its
// limit, and no balance exceeds what the bucket allows.
func TestStepProperties(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 42))
			a, clock := newArbiter(t, Config{Demand: demand.Config{IdleAfter: 200 * time.Millisecond}})
			type cl struct {
				key  string
				libs *fakeLib
				g, l map[string]int64
			}
			var clients []cl
			left := map[string]int64{"G0": 1000, "G1": 1000}
			for i := 0; i < 6; i++ {
				uuid := []string{"G0", "G1"}[r.IntN(2)]
				if left[uuid] < 2 {
					continue
				}
				g := 1 + r.Int64N(min(left[uuid]-1, 400))
				left[uuid] -= g
				l := g + r.Int64N(1000-g+1)
				key := fmt.Sprintf("c%d", i)
				_, lib := register(t, a, key, gpuShare(uuid, g, l))
				clients = append(clients, cl{key, lib, map[string]int64{uuid: g}, map[string]int64{uuid: l}})
			}
			for p := 0; p < 300; p++ {
				busy := map[string]bool{}
				for _, c := range clients {
					switch r.IntN(4) {
					case 0, 1:
						c.libs.launch(0, 1<<40)
						busy[c.key] = true
					case 2:
						c.libs.launch(0, r.Int64N(50))
					default:
						c.libs.rest(0)
					}
				}
				step(t, a, clock)
				sums := map[string]int64{}
				below := map[string]bool{}
				for _, s := range a.Snapshot() {
					var g, l int64
					for _, c := range clients {
						if c.key == s.Key {
							g, l = c.g[s.GPU], c.l[s.GPU]
						}
					}
					sums[s.GPU] += s.Share
					if s.Share > l {
						t.Fatalf("period %d: %s got %d above its limit %d", p, s.Key, s.Share, l)
					}
					if busy[s.Key] && s.Share < g {
						t.Fatalf("period %d: busy %s got %d below its guarantee %d", p, s.Key, s.Share, g)
					}
					if busy[s.Key] && s.Share < l {
						below[s.GPU] = true
					}
					// Static rate: one period of a share is `share` tokens;
					// the bucket holds at most two periods, the cushion at
					// most one period of the limit.
					if s.Tokens > max(2*s.Share, l) {
						t.Fatalf("period %d: %s holds %d tokens at share %d (limit %d)", p, s.Key, s.Tokens, s.Share, l)
					}
				}
				for uuid, sum := range sums {
					if sum > 1000 {
						t.Fatalf("period %d: GPU %s handed out %d", p, uuid, sum)
					}
					if below[uuid] && sum != 1000 {
						t.Fatalf("period %d: GPU %s handed out %d while a busy client is below its limit", p, uuid, sum)
					}
				}
			}
		})
	}
}

type brokenMeter struct{}

func (brokenMeter) Read(context.Context, string, []string) (Reading, error) {
	return Reading{}, errors.New("NVML gone")
}

func TestMeterErrorKeepsRates(t *testing.T) {
	a, clock := newArbiter(t, Config{Meter: brokenMeter{}})
	_, l := register(t, a, "a", gpuShare("G", 100, 1000))
	l.launch(0, 1<<40)
	step(t, a, clock)
	if st := a.Snapshot()[0]; st.Rate != 20_000 || st.Measured || st.Share != 1000 {
		t.Fatalf("snapshot %+v: want the static rate kept and the client served", st)
	}
}

// scriptedMeter answers the n-th Read (from 0) with script(n).
type scriptedMeter struct {
	n      int
	script func(n int) (Reading, error)
}

func (m *scriptedMeter) Read(context.Context, string, []string) (Reading, error) {
	m.n++
	return m.script(m.n - 1)
}

// TestRateWindow checks when the rate moves: launches are summed every
// period and busy time over the readings, and the rate is updated from the
// sums once they span MeterWindow (1 s) and at least 5 readings found the
// client busy, or once they span 60 windows.
func TestRateWindow(t *testing.T) {
	const ms = time.Millisecond
	tick := func(busy time.Duration) Reading {
		return Reading{Span: 200 * ms, Busy: map[string]time.Duration{"a": busy}}
	}
	cases := []struct {
		name   string
		script func(n int) (Reading, error)
		// steps is how many steps run; launches are 100 per step.
		steps    int
		want     float64 // rate after steps
		measured bool
	}{
		// One 200 ms tick every 4 steps, the client busy half of each:
		// 20 steps, 2000 launches, 0.5 s busy.
		{"every tick busy: an update after 1 s", every4(func(int) Reading { return tick(100 * ms) }), 20, 4000, true},
		{"not before the span reaches 1 s", every4(func(int) Reading { return tick(100 * ms) }), 19, 20000, false},
		// Busy in every other tick: at 1 s only 3 of 5 ticks found it
		// busy; the 5th busy tick is the 9th, at step 36: 3600
		// launches over 1 s busy.
		{"too few busy readings extend the window", every4(func(n int) Reading {
			if n%2 == 1 {
				return tick(0)
			}
			return tick(200 * ms)
		}), 35, 20000, false},
		{"the extended window closes with 5 busy readings", every4(func(n int) Reading {
			if n%2 == 1 {
				return tick(0)
			}
			return tick(200 * ms)
		}), 36, 3600, true},
		{"busy is capped at the span", every4(func(int) Reading { return tick(time.Second) }), 20, 2000, true},
		// Never found busy: the window closes after 60 s (1200 steps)
		// and is skipped, busy being below MinBusy.
		{"never busy: dropped after 60 windows", every4(func(int) Reading { return tick(0) }), 1300, 20000, false},
		// A failed reading (step 11) drops the window: the 1100
		// launches up to it are not compared with the busy time after
		// it. Five ticks later (step 28): 1700 launches over 0.5 s.
		{"a meter error drops the window", func(n int) (Reading, error) {
			switch {
			case n == 10:
				return Reading{}, errors.New("NVML gone")
			case n > 10 && n%4 == 3:
				return tick(100 * ms), nil
			}
			return Reading{}, nil
		}, 28, 3400, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, clock := newArbiter(t, Config{Meter: &scriptedMeter{script: c.script}})
			_, l := register(t, a, "a", gpuShare("G", 1000, 1000))
			for range c.steps {
				if got := l.launch(0, 100); got != 100 {
					t.Fatalf("launched %d, want 100", got)
				}
				step(t, a, clock)
			}
			if st := a.Snapshot()[0]; st.Rate != c.want || st.Measured != c.measured {
				t.Fatalf("rate %g measured %v, want %g %v", st.Rate, st.Measured, c.want, c.measured)
			}
		})
	}
}

// every4 is a script that ends a tick every 4th reading (n = 3, 7, ...)
// and has nothing in between.
func every4(tick func(n int) Reading) func(int) (Reading, error) {
	return func(n int) (Reading, error) {
		if n%4 != 3 {
			return Reading{}, nil
		}
		return tick(n / 4), nil
	}
}

func TestUngatedLaunchesAreReported(t *testing.T) {
	a, clock := newArbiter(t, Config{})
	_, l := register(t, a, "a", gpuShare("G", 100, 1000))
	l.ranUngated(0, 7)
	step(t, a, clock)
	if st := a.Snapshot()[0]; st.Ungated != 7 {
		t.Fatalf("snapshot %+v, want 7 ungated launches", st)
	}
}

// TestUseWindowsAndIdle checks what SeatStatus says of use: busy time over
// each closed use window labelled by the meter's kind, a simulated reading
// never adjusting the rate, and the idle rule applied to closed windows
// only: idle once they have stayed below the threshold for Idle.After, not
// a window before.
func TestUseWindowsAndIdle(t *testing.T) {
	const period = 50 * time.Millisecond
	busy := 0.5 // of each reading's span, for client a
	for _, simulated := range []bool{false, true} {
		t.Run(fmt.Sprintf("simulated=%v", simulated), func(t *testing.T) {
			m := &scriptedMeter{script: func(int) (Reading, error) {
				return Reading{Span: period, Busy: map[string]time.Duration{"a": time.Duration(busy * float64(period))}, Simulated: simulated}, nil
			}}
			rule := gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}
			a, clock := newArbiter(t, Config{Meter: m, UseWindow: 10 * time.Second, Idle: rule})
			_, l := register(t, a, "a", gpuShare("G", 500, 1000))
			start := clock.Now()
			busy = 0.5
			for range 200 { // 10 s: one window
				l.launch(0, 10)
				step(t, a, clock)
			}
			st := a.Snapshot()[0]
			want := gpuuse.Measured
			if simulated {
				want = gpuuse.Simulated
			}
			if st.Use.Source != want || st.Use.BusyMilli == nil || *st.Use.BusyMilli != 500 || !st.Use.At.Equal(clock.Now()) || !st.Use.From.Equal(start) {
				t.Fatalf("Use = %+v (busy %v), want %s 500 milli over [%v, %v]", st.Use, st.Use.BusyMilli, want, start, clock.Now())
			}
			if st.Measured == simulated {
				t.Errorf("rate measured %v with a simulated meter %v: simulated readings must not adjust the rate", st.Measured, simulated)
			}
			busy = 0.01
			quietFrom := clock.Now()
			for range 1000 { // 50 s quiet
				step(t, a, clock)
			}
			if st := a.Snapshot()[0]; st.Idle != nil {
				t.Fatalf("idle after %v quiet: %+v", clock.Now().Sub(quietFrom), st.Idle)
			}
			for range 200 { // the window that ends at 60 s quiet
				step(t, a, clock)
			}
			st = a.Snapshot()[0]
			if st.Idle == nil || !st.Idle.Since.Equal(quietFrom) || *st.Use.BusyMilli != 10 {
				t.Fatalf("after %v quiet: Idle %+v, Use %+v; want idle since %v", clock.Now().Sub(quietFrom), st.Idle, st.Use, quietFrom)
			}
			busy = 0.3
			for range 200 {
				step(t, a, clock)
			}
			if st := a.Snapshot()[0]; st.Idle != nil {
				t.Fatalf("still idle after a busy window: %+v", st.Idle)
			}
		})
	}
}
