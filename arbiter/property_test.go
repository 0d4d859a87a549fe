package arbiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/demand"
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

func (brokenMeter) Busy(context.Context, string, []string) (map[string]float64, error) {
	return nil, errors.New("NVML gone")
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

func TestUngatedLaunchesAreReported(t *testing.T) {
	a, clock := newArbiter(t, Config{})
	_, l := register(t, a, "a", gpuShare("G", 100, 1000))
	l.ranUngated(0, 7)
	step(t, a, clock)
	if st := a.Snapshot()[0]; st.Ungated != 7 {
		t.Fatalf("snapshot %+v, want 7 ungated launches", st)
	}
}
