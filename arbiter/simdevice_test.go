package arbiter

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// simDevice is a fake GPU shared by busy clients: each launch of client i
// takes kernel[i] of GPU time; a client launches while its grant record has
// tokens; when the launches of a period need more than the period, the GPU
// time slices equally between clients with work left and a preempted kernel
// resumes next period. It doubles as the Meter, reporting each client's
// busy fraction with seeded ±noise.
type simDevice struct {
	period   time.Duration
	keys     []string
	kernel   []time.Duration
	libs     []*fakeLib
	progress []float64
	busy     []float64
	noise    float64
	rng      *rand.Rand
}

// run executes one period and consumes the launches' tokens.
func (d *simDevice) run() {
	n := len(d.keys)
	if d.progress == nil {
		d.progress = make([]float64, n)
	}
	need := make([]float64, n)
	var open []int
	for i := range n {
		if b := d.libs[i].tokens(0); b > 0 {
			need[i] = float64(b)*d.kernel[i].Seconds() - d.progress[i]
			open = append(open, i)
		}
	}
	got := make([]float64, n)
	left := d.period.Seconds()
	for left > 1e-12 && len(open) > 0 {
		slice := left / float64(len(open))
		var still []int
		for _, i := range open {
			take := math.Min(slice, need[i]-got[i])
			got[i] += take
			left -= take
			if need[i]-got[i] > 1e-12 {
				still = append(still, i)
			}
		}
		open = still
	}
	d.busy = make([]float64, n)
	for i := range n {
		done := d.progress[i] + got[i]
		launches := int64(done/d.kernel[i].Seconds() + 1e-9)
		d.progress[i] = math.Max(0, done-float64(launches)*d.kernel[i].Seconds())
		d.libs[i].launch(0, launches)
		if d.libs[i].tokens(0) <= 0 {
			d.libs[i].launch(0, 1) // always has work: the next launch waits for a token
		} else {
			d.libs[i].rest(0)
		}
		d.busy[i] = got[i] / d.period.Seconds()
	}
}

func (d *simDevice) Busy(_ context.Context, _ string, keys []string) (map[string]float64, error) {
	out := map[string]float64{}
	for i, k := range d.keys {
		out[k] = d.busy[i] * (1 + d.noise*(2*d.rng.Float64()-1))
	}
	return out, nil
}

// TestFeedbackThroughTheArbiter runs the whole arbiter against the
// simulated device, with and without the meter, and compares the achieved
// time shares with the targets.
func TestFeedbackThroughTheArbiter(t *testing.T) {
	type cl struct {
		key              string
		guarantee, limit int64
		kernel           time.Duration
	}
	cases := []struct {
		name    string
		clients []cl
		target  []float64
	}{
		{"guarantees 500/300/200, kernels 1ms/100us/20us", []cl{
			{"a", 500, 1000, time.Millisecond}, {"b", 300, 1000, 100 * time.Microsecond}, {"c", 200, 1000, 20 * time.Microsecond}},
			[]float64{500, 300, 200}},
		{"limit 300 on a 2ms-kernel client, 10us neighbour", []cl{
			{"a", 200, 300, 2 * time.Millisecond}, {"b", 100, 1000, 10 * time.Microsecond}},
			[]float64{300, 700}},
	}
	for _, c := range cases {
		for _, metered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/metered=%v", c.name, metered), func(t *testing.T) {
				dev := &simDevice{period: DefaultPeriod, noise: 0.1, rng: rand.New(rand.NewPCG(9, 9))}
				cfg := Config{}
				if metered {
					cfg.Meter = dev
				}
				a, clock := newArbiter(t, cfg)
				for _, x := range c.clients {
					_, lib := register(t, a, x.key, gpuShare("G", x.guarantee, x.limit))
					dev.keys = append(dev.keys, x.key)
					dev.kernel = append(dev.kernel, x.kernel)
					dev.libs = append(dev.libs, lib)
				}
				const periods, window = 400, 100
				achieved := make([]float64, len(c.clients))
				for p := range periods {
					dev.run()
					step(t, a, clock)
					if p >= periods-window {
						for i := range achieved {
							achieved[i] += dev.busy[i] * 1000 / window
						}
					}
				}
				var worst float64
				for i := range achieved {
					worst = math.Max(worst, math.Abs(achieved[i]-c.target[i]))
				}
				t.Logf("target %v achieved %s (max error %.1f thousandths)", c.target, fmtShares(achieved), worst)
				if metered && worst > 10 {
					t.Fatalf("metered: achieved %s, target %v", fmtShares(achieved), c.target)
				}
			})
		}
	}
}

func fmtShares(s []float64) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.0f", v)
	}
	return out + "]"
}
