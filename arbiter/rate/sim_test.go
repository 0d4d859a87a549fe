package rate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/share"
	"github.com/tessera-gpu/tessera/request"
)

type simClient struct {
	guarantee, limit int64
	kernel           time.Duration
}

// meterWindow is the span one rate update covers, as in the arbiter.
const meterWindow = time.Second

// simulate runs the arbiter's per-period loop (share -> tokens -> bucket ->
// GPU -> measurement -> rate) for periods periods with every client busy
// and returns the targets and each client's achieved share (thousandths)
// over the last quarter of the run. The rate is updated from each client's
// launches and measured busy time summed over meterWindow.
func simulate(t *testing.T, clients []simClient, measure bool, periods int, change func(p int, g *simGPU)) (target []int64, achieved []float64) {
	t.Helper()
	cfg := Config{Period: 50 * time.Millisecond}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gpu := &simGPU{period: cfg.Period, noise: 0.1, rng: rand.New(rand.NewPCG(1, 2))}
	n := len(clients)
	in := make([]share.Client, n)
	states := make([]State, n)
	balance := make([]int64, n)
	working := make([]bool, n)
	for i, c := range clients {
		in[i] = share.Client{Guarantee: c.guarantee, Limit: c.limit, Demand: request.Whole}
		gpu.kernel = append(gpu.kernel, c.kernel)
		states[i] = cfg.New()
		working[i] = true
	}
	target, err := share.Allocate(in)
	if err != nil {
		t.Fatal(err)
	}
	achieved = make([]float64, n)
	obs := make([]Observation, n)
	window := periods / 4
	for p := 0; p < periods; p++ {
		if change != nil {
			change(p, gpu)
		}
		for i := range n {
			var grant int64
			grant, states[i] = cfg.Tokens(states[i], target[i])
			r := Bucket(balance[i], grant, 2*grant)
			if r.Lower {
				balance[i] = r.Ceiling
			}
			balance[i] += r.Add
		}
		launches, busy, measured := gpu.run(balance, working)
		for i := range n {
			balance[i] -= launches[i]
			obs[i].Launches += launches[i]
			obs[i].Busy += time.Duration(measured[i] * float64(cfg.Period))
			obs[i].Span += cfg.Period
			if measure && obs[i].Span >= meterWindow {
				states[i] = cfg.Update(states[i], obs[i])
				obs[i] = Observation{}
			}
			if p >= periods-window {
				achieved[i] += busy[i] * 1000 / float64(window)
			}
		}
	}
	return target, achieved
}

func TestFeedbackConvergesOnTargetShares(t *testing.T) {
	cases := []struct {
		name    string
		clients []simClient
		change  func(p int, g *simGPU)
	}{
		{"three busy, kernels 1ms/100us/20us", []simClient{
			{500, 1000, time.Millisecond}, {300, 1000, 100 * time.Microsecond}, {200, 1000, 20 * time.Microsecond}}, nil},
		{"limit caps a long-kernel client", []simClient{
			{200, 300, time.Millisecond}, {100, 1000, 20 * time.Microsecond}}, nil},
		{"small guarantees share the leftover", []simClient{
			{100, 1000, 2 * time.Millisecond}, {100, 1000, 10 * time.Microsecond}, {50, 500, 300 * time.Microsecond}}, nil},
		{"kernels shrink tenfold mid-run", []simClient{
			{600, 1000, 50 * time.Microsecond}, {400, 1000, 50 * time.Microsecond}},
			func(p int, g *simGPU) {
				if p == 400 {
					g.kernel[0] = 5 * time.Microsecond
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target, fb := simulate(t, c.clients, true, 1600, c.change)
			_, static := simulate(t, c.clients, false, 1600, c.change)
			var fbErr, staticErr float64
			for i := range target {
				fbErr = math.Max(fbErr, math.Abs(fb[i]-float64(target[i])))
				staticErr = math.Max(staticErr, math.Abs(static[i]-float64(target[i])))
			}
			t.Logf("target %v\n  feedback achieved %s (max error %.1f)\n  static   achieved %s (max error %.1f)",
				target, fmtShares(fb), fbErr, fmtShares(static), staticErr)
			// Within 1% of the GPU despite 10% measurement noise.
			if fbErr > 10 {
				t.Fatalf("feedback: achieved %s, target %v", fmtShares(fb), target)
			}
			if staticErr <= fbErr {
				t.Fatalf("the static rate should be worse on mixed kernels: %.1f vs %.1f", staticErr, fbErr)
			}
		})
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
