package rate

import (
	"math/rand/v2"
	"time"
)

// simGPU is a fake device that turns launches into busy time: each client's
// kernels take a fixed time; a client launches as long as it holds tokens;
// when the launches of one period need more than the period, the GPU time
// slices between the clients that still have work (equal slices, as the
// driver's time-slicing scheduler does; a kernel preempted at the end of a
// period resumes in the next), and unrun launches keep their tokens.
// Measured utilisation carries seeded multiplicative noise.
type simGPU struct {
	period   time.Duration
	kernel   []time.Duration
	noise    float64
	rng      *rand.Rand
	progress []float64 // seconds already run of a preempted kernel
}

// run executes one period given each client's token balance and whether it
// has work; it returns the launches run and the busy fraction per client
// (true and measured).
func (g *simGPU) run(balance []int64, working []bool) (launches []int64, busy, measured []float64) {
	n := len(balance)
	if g.progress == nil {
		g.progress = make([]float64, n)
	}
	need := make([]float64, n) // seconds of GPU each client would use
	for i := range n {
		if working[i] && balance[i] > 0 {
			need[i] = float64(balance[i])*g.kernel[i].Seconds() - g.progress[i]
		}
	}
	got := make([]float64, n)
	left := g.period.Seconds()
	open := []int{}
	for i := range n {
		if need[i] > 0 {
			open = append(open, i)
		}
	}
	for left > 1e-12 && len(open) > 0 {
		slice := left / float64(len(open))
		still := open[:0:0]
		for _, i := range open {
			take := min(slice, need[i]-got[i])
			got[i] += take
			left -= take
			if need[i]-got[i] > 1e-12 {
				still = append(still, i)
			}
		}
		open = still
	}
	launches = make([]int64, n)
	busy = make([]float64, n)
	measured = make([]float64, n)
	for i := range n {
		done := g.progress[i] + got[i]
		launches[i] = int64(done/g.kernel[i].Seconds() + 1e-9)
		g.progress[i] = max(0, done-float64(launches[i])*g.kernel[i].Seconds())
		busy[i] = got[i] / g.period.Seconds()
		measured[i] = busy[i] * (1 + g.noise*(2*g.rng.Float64()-1))
	}
	return launches, busy, measured
}
