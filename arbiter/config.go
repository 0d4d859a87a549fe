package arbiter

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/demand"
	"github.com/tessera-gpu/tessera/arbiter/grant"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/arbiter/rate"
	"github.com/tessera-gpu/tessera/arbiter/thrash"
	"github.com/tessera-gpu/tessera/gpuuse"
)

// Mode is how compute is enforced.
type Mode int

const (
	// ModeTokens gates launches with grant regions (the default).
	ModeTokens Mode = iota
	// ModeMPS runs an MPS control daemon per GPU (Config.MPS) and caps
	// each client with MPS's active thread percentage and pinned memory
	// limit (ClientEnv). Grant regions are published ungated and kept
	// beating, so the interception library still caps memory and never
	// gates launches. Clients use one GPU each.
	ModeMPS
)

// String names the mode as flags and logs spell it.
func (m Mode) String() string {
	switch m {
	case ModeTokens:
		return "tokens"
	case ModeMPS:
		return "mps"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Defaults for Config.
const (
	DefaultPeriod       = 50 * time.Millisecond
	DefaultStaleAfter   = 2 * time.Second
	DefaultBurstPeriods = 2
	// DefaultMeterWindow is five NVML sampling ticks of ~200 ms.
	DefaultMeterWindow = time.Second
	// DefaultUseWindow holds ~50 NVML ticks, so a client with a tenth of
	// the GPU is seen in ~5 of them, and matches the 10 s at which the
	// issue asks use to be published at most.
	DefaultUseWindow = 10 * time.Second
)

// Config is the arbiter's setting; zero fields take defaults.
type Config struct {
	Mode Mode
	// Period is the time between steps, [1ms, StaleAfter/4].
	Period time.Duration
	// StaleAfter is written into every region, [4 × Period, 1h].
	StaleAfter time.Duration
	// BurstPeriods bounds a busy client's balance to this many periods of
	// its grant, [1, 100].
	BurstPeriods int
	// Rate tunes the token controller; its Period is Period.
	Rate rate.Config
	// Demand tunes demand estimation and idle reclaim.
	Demand demand.Config
	// Quantum is the exclusive slice on memory-oversubscribed GPUs.
	Quantum time.Duration
	// Capacity is, per GPU UUID, the memory in bytes the working sets
	// must fit in before the GPU switches to exclusive slices. GPUs
	// absent (or 0) are never switched.
	Capacity map[string]uint64
	// Meter measures GPU time per client; nil keeps the static rate.
	// Unused in ModeMPS.
	Meter Meter
	// MeterWindow is the least measured span one rate update covers:
	// each client's launches and measured busy time are summed until the
	// Meter's readings span this much and 5 of them found the client
	// busy (or they span 60 windows), then the rate is updated from the
	// sums. [Period, 1m]; it should hold several of the Meter's sampling
	// ticks. Unused without a Meter.
	MeterWindow time.Duration
	// UseWindow is the span of each client's use window (SeatStatus.Use):
	// its busy time over the Meter's readings that span this much.
	// [MeterWindow, 1m].
	UseWindow time.Duration
	// Idle is the idle-holder rule applied to the closed use windows
	// (SeatStatus.Idle); zero fields take gpuuse's defaults.
	Idle gpuuse.IdleRule
	// KeepIdleGuarantee keeps an idle holder's guarantee. By default
	// (false) a seat marked idle (SeatStatus.Idle) lends its guarantee: the
	// split guarantees it only IdleFloor and fills it above that only from
	// what its neighbours leave below their limits, until a use window at
	// or above Idle's threshold ends the mark (the step that closes it
	// gives the guarantee back). Memory is never lent. Unused in ModeMPS.
	KeepIdleGuarantee bool
	// MPS configures the control daemons in ModeMPS (Root and GPUs are
	// required there; its Logger defaults to Logger). Ignored in
	// ModeTokens.
	MPS mps.Config
	// Clock defaults to the system clock.
	Clock Clock
	// Mono returns CLOCK_MONOTONIC ns for heartbeats; defaults to
	// grant.Monotonic. Tests inject a fake.
	Mono func() (uint64, error)
	// Epoch is written into regions (informational); defaults to the
	// start time in Unix ns.
	Epoch  uint64
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.BurstPeriods == 0 {
		c.BurstPeriods = DefaultBurstPeriods
	}
	if c.MeterWindow == 0 {
		c.MeterWindow = DefaultMeterWindow
	}
	if c.UseWindow == 0 {
		c.UseWindow = max(DefaultUseWindow, c.MeterWindow)
	}
	c.Idle = c.Idle.WithDefaults()
	c.Rate.Period = c.Period
	c.Rate = c.Rate.WithDefaults()
	c.Demand = c.Demand.WithDefaults()
	if c.Quantum == 0 {
		c.Quantum = thrash.DefaultQuantum
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Mono == nil {
		c.Mono = grant.Monotonic
	}
	if c.Epoch == 0 {
		c.Epoch = uint64(c.Clock.Now().UnixNano())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Mode == ModeMPS {
		if c.MPS.Logger == nil {
			c.MPS.Logger = c.Logger
		}
		c.MPS = c.MPS.WithDefaults()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Mode != ModeTokens && c.Mode != ModeMPS:
		return fmt.Errorf("mode: must be ModeTokens or ModeMPS, got %d", c.Mode)
	case c.StaleAfter < 4*time.Millisecond || c.StaleAfter > time.Hour || c.StaleAfter%time.Millisecond != 0:
		return fmt.Errorf("staleAfter: must be whole milliseconds in [4ms, 1h], got %v", c.StaleAfter)
	case c.Period < time.Millisecond || c.Period > c.StaleAfter/4:
		return fmt.Errorf("period: must be in [1ms, staleAfter/4 = %v] (the heartbeat rides on every step), got %v",
			c.StaleAfter/4, c.Period)
	case c.BurstPeriods < 1 || c.BurstPeriods > 100:
		return fmt.Errorf("burstPeriods: must be in [1, 100], got %d", c.BurstPeriods)
	case c.MeterWindow < c.Period || c.MeterWindow > time.Minute:
		return fmt.Errorf("meterWindow: must be in [period = %v, 1m], got %v", c.Period, c.MeterWindow)
	case c.UseWindow < c.MeterWindow || c.UseWindow > time.Minute:
		return fmt.Errorf("useWindow: must be in [meterWindow = %v, 1m], got %v", c.MeterWindow, c.UseWindow)
	}
	if err := c.Idle.Validate("idle.belowMilli", "idle.after"); err != nil {
		return err
	}
	if err := c.Rate.Validate(); err != nil {
		return fmt.Errorf("rate: %w", err)
	}
	if err := c.Demand.Validate(); err != nil {
		return fmt.Errorf("demand: %w", err)
	}
	if err := (thrash.Config{Capacity: 1, Quantum: c.Quantum}).Validate(); err != nil {
		return err
	}
	if c.Mode == ModeMPS {
		if err := c.MPS.Validate(); err != nil {
			return err
		}
	}
	return nil
}
