package demand

import (
	"fmt"
	"math"
	"time"

	"github.com/tessera-gpu/tessera/request"
)

// Defaults for Config.
const (
	DefaultIdleAfter = 10 * time.Second
	DefaultHeadroom  = 1.25
)

// Config tunes demand estimation and idle reclaim; zero fields take defaults.
type Config struct {
	// IdleAfter is how long an idle client keeps its burst cushion, [0, 24h].
	IdleAfter time.Duration
	// Headroom multiplies a partially used share to get the demand, [1, 4].
	Headroom float64
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.IdleAfter == 0 {
		c.IdleAfter = DefaultIdleAfter
	}
	if c.Headroom == 0 {
		c.Headroom = DefaultHeadroom
	}
	return c
}

// Validate checks a configuration after defaults.
func (c Config) Validate() error {
	switch {
	case c.IdleAfter < 0 || c.IdleAfter > 24*time.Hour:
		return fmt.Errorf("idleAfter: must be in [0, 24h], got %v", c.IdleAfter)
	case !(c.Headroom >= 1 && c.Headroom <= 4):
		return fmt.Errorf("headroom: must be in [1, 4], got %g", c.Headroom)
	}
	return nil
}

// Phase is where a client stands.
type Phase int

const (
	// Active clients launched during the last period.
	Active Phase = iota
	// Idle clients have not launched since, for less than IdleAfter.
	Idle
	// Reclaimed clients have been idle for IdleAfter or longer.
	Reclaimed
)

func (p Phase) String() string {
	switch p {
	case Active:
		return "active"
	case Idle:
		return "idle"
	case Reclaimed:
		return "reclaimed"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Sample is one period of one client on one GPU.
type Sample struct {
	// Launches is the tokens it consumed.
	Launches int64
	// Waited is set when it had threads waiting for tokens (waiters > 0
	// now, or waits grew).
	Waited bool
	// RanOut is set when its balance reached zero (or debt).
	RanOut bool
	// TokensPerMilli is the tokens one thousandth of the GPU bought for
	// the period (rate × period / 1000), > 0.
	TokensPerMilli float64
}

// State is one client's memory on one GPU.
type State struct {
	LastActive time.Time
	// LastShare is the share it had while last active.
	LastShare int64
}

// New is a client registered at now with guarantee g: it starts idle with
// a guarantee-sized cushion.
func New(now time.Time, g int64) State { return State{LastActive: now, LastShare: g} }

// Verdict is the demand for the next period.
type Verdict struct {
	Phase Phase
	// Demand is in thousandths, [0, 1000].
	Demand int64
	// Cushion is the standing balance an idle client keeps, in thousandths.
	Cushion int64
}

// Step classifies a client from its sample at now.
func (c Config) Step(s State, now time.Time, smp Sample, guarantee int64) (Verdict, State) {
	switch {
	case smp.Waited || smp.RanOut:
		s.LastActive = now
		return Verdict{Phase: Active, Demand: request.Whole}, s
	case smp.Launches > 0:
		s.LastActive = now
		used := float64(smp.Launches) / math.Max(smp.TokensPerMilli, 1e-9)
		d := int64(math.Ceil(used*c.Headroom)) + 1
		return Verdict{Phase: Active, Demand: min(d, request.Whole)}, s
	case now.Sub(s.LastActive) < c.IdleAfter:
		return Verdict{Phase: Idle, Cushion: max(s.LastShare, guarantee)}, s
	default:
		return Verdict{Phase: Reclaimed, Cushion: guarantee}, s
	}
}

// Granted records the share an active client got.
func Granted(s State, v Verdict, got int64) State {
	if v.Phase == Active {
		s.LastShare = got
	}
	return s
}
