package rate

import (
	"fmt"
	"math"
	"time"
)

// Defaults for Config.
const (
	// DefaultStaticRate assumes 50 µs kernels: 20 000 launches per second
	// of whole-GPU time. It is the rate without measurements.
	DefaultStaticRate = 20_000
	DefaultMinRate    = 10         // 100 ms kernels
	DefaultMaxRate    = 10_000_000 // 100 ns kernels
	DefaultGain       = 0.25
	DefaultMaxStep    = 4
	// DefaultMinBusy ignores observations below 1% busy: too little GPU
	// time to estimate a rate from without amplifying noise.
	DefaultMinBusy = 0.01
)

// Config is the controller's tuning; zero fields take the defaults.
type Config struct {
	// Period is the time one grant covers, (0, 10s]. Update does not use
	// it: an observation carries its own span.
	Period time.Duration
	// StaticRate is the initial rate and the rate used without
	// measurements, in launches per GPU-second, [MinRate, MaxRate].
	StaticRate float64
	// MinRate and MaxRate bound every rate, 0 < MinRate <= MaxRate.
	MinRate, MaxRate float64
	// Gain is the weight of a new estimate, (0, 1].
	Gain float64
	// MaxStep bounds the change of a rate per update as a factor, >= 1.
	MaxStep float64
	// MinBusy is the smallest busy fraction of an observation's span a
	// rate is estimated from, [0, 1).
	MinBusy float64
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.StaticRate == 0 {
		c.StaticRate = DefaultStaticRate
	}
	if c.MinRate == 0 {
		c.MinRate = DefaultMinRate
	}
	if c.MaxRate == 0 {
		c.MaxRate = DefaultMaxRate
	}
	if c.Gain == 0 {
		c.Gain = DefaultGain
	}
	if c.MaxStep == 0 {
		c.MaxStep = DefaultMaxStep
	}
	if c.MinBusy == 0 {
		c.MinBusy = DefaultMinBusy
	}
	return c
}

// Validate checks a configuration after defaults.
func (c Config) Validate() error {
	switch {
	case c.Period <= 0 || c.Period > 10*time.Second:
		return fmt.Errorf("period: must be in (0, 10s], got %v", c.Period)
	case c.MinRate <= 0 || c.MaxRate < c.MinRate:
		return fmt.Errorf("minRate, maxRate: must satisfy 0 < minRate <= maxRate, got %g, %g", c.MinRate, c.MaxRate)
	case c.StaticRate < c.MinRate || c.StaticRate > c.MaxRate:
		return fmt.Errorf("staticRate: must be in [%g, %g], got %g", c.MinRate, c.MaxRate, c.StaticRate)
	case !(c.Gain > 0 && c.Gain <= 1):
		return fmt.Errorf("gain: must be in (0, 1], got %g", c.Gain)
	case !(c.MaxStep >= 1):
		return fmt.Errorf("maxStep: must be >= 1, got %g", c.MaxStep)
	case !(c.MinBusy >= 0 && c.MinBusy < 1):
		return fmt.Errorf("minBusy: must be in [0, 1), got %g", c.MinBusy)
	}
	return nil
}

// State is one client's controller state on one GPU.
type State struct {
	// Rate is launches per second of whole-GPU time.
	Rate float64
	// Carry is the fraction of a token not granted yet.
	Carry float64
	// Measured is set once a measurement has adjusted Rate.
	Measured bool
}

// New returns a client's initial state.
func (c Config) New() State { return State{Rate: c.StaticRate} }

// Tokens returns the tokens to grant for one period at share (thousandths)
// and the state with the fraction carried over.
func (c Config) Tokens(s State, share int64) (int64, State) {
	if share <= 0 {
		s.Carry = 0
		return 0, s
	}
	want := s.Rate*float64(share)/1000*c.Period.Seconds() + s.Carry
	n := math.Floor(want)
	s.Carry = want - n
	return int64(n), s
}

// Observation is what the arbiter saw of a client over a window of
// periods: the launches it made and the GPU time its kernels were measured
// to run. The busy time is summed over the meter's readings in the window,
// so the estimate is a ratio of sums: a meter that attributes each coarse
// sampling tick wholly to one client (NVML) is right on average over many
// ticks, while per-tick ratios would not be.
type Observation struct {
	// Launches is the tokens the client consumed in the window.
	Launches int64
	// Busy is the GPU time its kernels ran, as measured, within Span.
	Busy time.Duration
	// Span is the time the measurements cover; 0 when nothing was
	// measured.
	Span time.Duration
}

// Update moves the rate towards the estimate launches ÷ busy seconds: the
// first estimate replaces the static rate, which is only a guess (20× off
// for 1 ms kernels); later ones are weighted by Gain, the change bounded by
// MaxStep. With nothing measured, or too little activity to estimate from
// (no launches, or busy below MinBusy of the span), the state is unchanged.
func (c Config) Update(s State, o Observation) State {
	if o.Launches <= 0 || o.Span <= 0 || o.Busy <= 0 || o.Busy.Seconds() < c.MinBusy*o.Span.Seconds() {
		return s
	}
	estimate := float64(o.Launches) / o.Busy.Seconds()
	next := estimate
	if s.Measured {
		next = (1-c.Gain)*s.Rate + c.Gain*estimate
		next = math.Min(math.Max(next, s.Rate/c.MaxStep), s.Rate*c.MaxStep)
	}
	s.Rate = math.Min(math.Max(next, c.MinRate), c.MaxRate)
	s.Measured = true
	return s
}
