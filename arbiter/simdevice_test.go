package arbiter

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// simClient is one client of the simulated device.
type simClient struct {
	key    string
	kernel time.Duration
	lib    *fakeLib
	// progress is the seconds already run of a preempted kernel.
	progress float64
	// busy is the fraction of the last period its kernels ran (the
	// truth the tests compare with targets).
	busy float64
	// tick is the seconds its kernels ran in the current NVML tick.
	tick float64
}

// simDevice is a fake GPU shared by busy clients: each launch of a client
// takes its kernel time; a client launches while its grant record has
// tokens; when the launches of a period need more than the period, the GPU
// time slices equally between clients with work left and a preempted kernel
// resumes next period.
//
// It doubles as the Meter and measures the way NVML does on real GPUs
// (arbiter/nvmlmeter/raw_gpu_test.go, H200, driver 580): the driver samples
// once per tick of tickPeriods periods (200 ms); at the end of a tick it
// attributes the whole tick's device utilisation (whole percent) to ONE
// process, chosen at random with probability proportional to its share of
// the tick's busy time (seeded), and reports nothing for the others;
// between ticks there is nothing new.
type simDevice struct {
	period      time.Duration
	tickPeriods int
	clients     []*simClient
	rng         *rand.Rand
	// periods is how many periods of the current tick have run.
	periods int
	// Unread: the span of the ticks ended since the last reading and the
	// busy time attributed in them.
	span time.Duration
	read map[string]time.Duration
}

func newSimDevice(seed uint64) *simDevice {
	return &simDevice{period: DefaultPeriod, tickPeriods: 4, rng: rand.New(rand.NewPCG(seed, seed))}
}

func (d *simDevice) add(key string, kernel time.Duration, lib *fakeLib) {
	d.clients = append(d.clients, &simClient{key: key, kernel: kernel, lib: lib})
}

func (d *simDevice) remove(key string) {
	for i, c := range d.clients {
		if c.key == key {
			d.clients = append(d.clients[:i], d.clients[i+1:]...)
			return
		}
	}
}

// run executes one period and consumes the launches' tokens.
func (d *simDevice) run() {
	n := len(d.clients)
	need := make([]float64, n)
	var open []int
	for i, c := range d.clients {
		if b := c.lib.tokens(0); b > 0 {
			need[i] = float64(b)*c.kernel.Seconds() - c.progress
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
	for i, c := range d.clients {
		done := c.progress + got[i]
		launches := int64(done/c.kernel.Seconds() + 1e-9)
		c.progress = math.Max(0, done-float64(launches)*c.kernel.Seconds())
		c.lib.launch(0, launches)
		if c.lib.tokens(0) <= 0 {
			c.lib.launch(0, 1) // always has work: the next launch waits for a token
		} else {
			c.lib.rest(0)
		}
		c.busy = got[i] / d.period.Seconds()
		c.tick += got[i]
	}
	d.periods++
	if d.periods == d.tickPeriods {
		d.endTick()
	}
}

// endTick samples the tick as NVML does: one process gets it all.
func (d *simDevice) endTick() {
	tick := time.Duration(d.tickPeriods) * d.period
	var total float64
	for _, c := range d.clients {
		total += c.tick
	}
	d.span += tick
	if d.read == nil {
		d.read = map[string]time.Duration{}
	}
	if total > 0 {
		r := d.rng.Float64() * total
		chosen := d.clients[len(d.clients)-1]
		for _, c := range d.clients {
			if r < c.tick {
				chosen = c
				break
			}
			r -= c.tick
		}
		sm := math.Round(100 * total / tick.Seconds())
		d.read[chosen.key] += time.Duration(sm / 100 * float64(tick))
	}
	for _, c := range d.clients {
		c.tick = 0
	}
	d.periods = 0
}

// Read is the Meter: the ticks ended since the last call and the busy
// time attributed in them.
func (d *simDevice) Read(context.Context, string, []string) (Reading, error) {
	r := Reading{Span: d.span, Busy: d.read}
	d.span, d.read = 0, nil
	return r, nil
}

type simCl struct {
	key              string
	guarantee, limit int64
	kernel           time.Duration
}

// simRun drives an arbiter and the simulated device.
type simRun struct {
	t     *testing.T
	a     *Arbiter
	clock *fakeClock
	dev   *simDevice
}

func newSimRun(t *testing.T, metered bool, seed uint64) *simRun {
	dev := newSimDevice(seed)
	cfg := Config{}
	if metered {
		cfg.Meter = dev
	}
	a, clock := newArbiter(t, cfg)
	return &simRun{t, a, clock, dev}
}

func (r *simRun) join(c simCl) {
	_, lib := register(r.t, r.a, c.key, gpuShare("G", c.guarantee, c.limit))
	r.dev.add(c.key, c.kernel, lib)
}

func (r *simRun) leave(key string) {
	if err := r.a.Unregister(context.Background(), key); err != nil {
		r.t.Fatal(err)
	}
	r.dev.remove(key)
}

// run steps periods times and returns each client's true share
// (thousandths) averaged over the last window periods.
func (r *simRun) run(periods, window int) map[string]float64 {
	achieved := map[string]float64{}
	for p := range periods {
		r.dev.run()
		step(r.t, r.a, r.clock)
		if p >= periods-window {
			for _, c := range r.dev.clients {
				achieved[c.key] += c.busy * 1000 / float64(window)
			}
		}
	}
	return achieved
}

// Tolerance of the metered shares, thousandths. NVML's one-process-a-tick
// sampling carries little information per tick: a client with a third of
// the GPU is picked in a third of 5 ticks a second, so even 200 s pin its
// share to about ±1.5% (one standard deviation), and the rate's window and
// gain add to that. Across seeds 1-20 the worst client of each case below
// was off by 42-52 over 200 s; the first design (per-tick ratios) on the
// same fake is off by 281-289, a client starved to 6-19
// (docs/enforcement.md).
const meteredTolerance = 60

// TestFeedbackThroughTheArbiter runs the whole arbiter against the
// simulated device, with and without the meter, and compares the achieved
// time shares over 200 s (after 30 s) with the targets.
func TestFeedbackThroughTheArbiter(t *testing.T) {
	cases := []struct {
		name    string
		clients []simCl
		target  []float64
	}{
		{"guarantees 500/300/200, kernels 1ms/100us/20us", []simCl{
			{"a", 500, 1000, time.Millisecond}, {"b", 300, 1000, 100 * time.Microsecond}, {"c", 200, 1000, 20 * time.Microsecond}},
			[]float64{500, 300, 200}},
		{"limit 300 on a 2ms-kernel client, 10us neighbour", []simCl{
			{"a", 200, 300, 2 * time.Millisecond}, {"b", 100, 1000, 10 * time.Microsecond}},
			[]float64{300, 700}},
	}
	for _, c := range cases {
		for _, metered := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/metered=%v", c.name, metered), func(t *testing.T) {
				r := newSimRun(t, metered, 9)
				for _, x := range c.clients {
					r.join(x)
				}
				got := r.run(4600, 4000)
				achieved := make([]float64, len(c.clients))
				var worst float64
				for i, x := range c.clients {
					achieved[i] = got[x.key]
					worst = math.Max(worst, math.Abs(achieved[i]-c.target[i]))
				}
				t.Logf("target %v achieved %s (max error %.1f thousandths)", c.target, fmtShares(achieved), worst)
				if metered && worst > meteredTolerance {
					t.Fatalf("metered: achieved %s, target %v (tolerance %d)", fmtShares(achieved), c.target, meteredTolerance)
				}
			})
		}
	}
}

// TestNeighbourJoinsAndLeaves is what tessera up showed on an H200 with
// the NVML meter: a (guarantee 250, limit 800) alone got its limit; when b
// (500, 1000) joined, a fell to 100-140, below its guarantee, and b got
// 620-710; a recovered when b left. Here a must get its limit alone, both
// at least their guarantees together (targets 333 and 667, by guarantee),
// and a its limit again after b leaves.
func TestNeighbourJoinsAndLeaves(t *testing.T) {
	a := simCl{"a", 250, 800, 500 * time.Microsecond}
	b := simCl{"b", 500, 1000, 2 * time.Millisecond}
	r := newSimRun(t, true, 7)
	r.join(a)
	alone := r.run(400, 300)
	r.join(b)
	both := r.run(4600, 4000)
	r.leave("b")
	after := r.run(400, 300)
	t.Logf("alone: a %.0f (target 800); together: a %.0f b %.0f (targets 333 667); after: a %.0f (target 800)",
		alone["a"], both["a"], both["b"], after["a"])
	for _, got := range []float64{alone["a"], after["a"]} {
		// Alone, every NVML tick is a's: its rate is measured exactly.
		if math.Abs(got-800) > 20 {
			t.Errorf("a alone: %.0f before b, %.0f after; want its limit 800 ± 20", alone["a"], after["a"])
		}
	}
	if both["a"] < 250 || both["b"] < 500 ||
		math.Abs(both["a"]-333) > meteredTolerance || math.Abs(both["b"]-667) > meteredTolerance {
		t.Errorf("together: a %.0f, b %.0f; want at least the guarantees 250 and 500, and 333 and 667 ± %d",
			both["a"], both["b"], meteredTolerance)
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
