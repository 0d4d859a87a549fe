package gpuuse

import (
	"fmt"
	"time"
)

// Pacing of a node's use publication (Pacer). What a reader acts on, a
// move of a fifth of a GPU or an idle mark flipping (marks take minutes),
// goes out at once, but never twice within Gap, which bounds a node's
// writes at one per Gap however its use moves. The period only refreshes
// figures that moved less and keeps the object fresh for the views
// (stale after four of the longest periods): so the default is the
// longest period the range allows, 30 s, which halves the writes of a
// quiet cluster against 15 s (a thousand nodes: about 33 a second), and
// a view is then at most three use windows behind on small moves.
const (
	DefaultPublishPeriod = 30 * time.Second
	MinPublishPeriod     = 10 * time.Second
	MaxPublishPeriod     = 30 * time.Second
	DefaultPublishGap    = 5 * time.Second
	DefaultBusyStepMilli = 200
)

// ValidatePublishPeriod checks a publication period; name is how the
// caller names it (a flag) in the error.
func ValidatePublishPeriod(name string, d time.Duration) error {
	if d < MinPublishPeriod || d > MaxPublishPeriod {
		return fmt.Errorf("%s: must be in [%v, %v], got %v", name, MinPublishPeriod, MaxPublishPeriod, d)
	}
	return nil
}

// Why says why Pacer.Due wants a publication ("" when it does not).
type Why string

const (
	WhyFirst  Why = "first"  // nothing published yet
	WhyPeriod Why = "period" // the period has passed
	WhyChange Why = "change" // a large change, at least Gap after the last
	WhyRetry  Why = "retry"  // Gap after a failed try
)

// Pacer decides when a node's use records are published: the first time,
// then once per Period, and sooner, at least Gap after the last, when the
// records changed a lot: a share came or went or its booking changed, its
// source changed, its idle mark flipped, or its busy fraction moved by
// BusyStepMilli or more. After a failed publication it waits Gap before
// the next try. It reads no clock: each call says what time it is. Zero
// fields take the defaults.
type Pacer struct {
	Period        time.Duration
	Gap           time.Duration
	BusyStepMilli int64

	last    time.Time // last publication
	sent    map[shareKey]mark
	started bool
	// failed is when the last try failed; zero after a success.
	failed time.Time
}

type shareKey struct{ workload, gpu string }

// mark is what of a share the pacer compares.
type mark struct {
	booked Booked
	source Source
	busy   *int64
	idle   bool
}

func marks(gpus []GPU) map[shareKey]mark {
	out := map[shareKey]mark{}
	for _, g := range gpus {
		for _, s := range g.Shares {
			out[shareKey{s.Workload, s.GPU}] = mark{booked: s.Booked, source: s.Use.Source, busy: s.Use.BusyMilli, idle: s.Idle != nil}
		}
	}
	return out
}

func (p *Pacer) withDefaults() (period, gap time.Duration, step int64) {
	period, gap, step = p.Period, p.Gap, p.BusyStepMilli
	if period == 0 {
		period = DefaultPublishPeriod
	}
	if gap == 0 {
		gap = DefaultPublishGap
	}
	if step == 0 {
		step = DefaultBusyStepMilli
	}
	return period, gap, step
}

// Due says whether gpus should be published at now, and why.
func (p *Pacer) Due(now time.Time, gpus []GPU) Why {
	period, gap, step := p.withDefaults()
	if !p.failed.IsZero() {
		if d := now.Sub(p.failed); d >= 0 && d < gap {
			return ""
		}
		return WhyRetry
	}
	since := now.Sub(p.last)
	switch {
	case !p.started:
		return WhyFirst
	case since >= period || since < 0: // a clock set back is no reason to stay silent
		return WhyPeriod
	case since < gap:
		return ""
	case p.changed(gpus, step):
		return WhyChange
	}
	return ""
}

func (p *Pacer) changed(gpus []GPU, step int64) bool {
	now := marks(gpus)
	if len(now) != len(p.sent) {
		return true
	}
	for k, m := range now {
		was, ok := p.sent[k]
		switch {
		case !ok, m.booked != was.booked, m.source != was.source, m.idle != was.idle, (m.busy == nil) != (was.busy == nil):
			return true
		case m.busy != nil && abs(*m.busy-*was.busy) >= step:
			return true
		}
	}
	return false
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Sent records that gpus were published at now.
func (p *Pacer) Sent(now time.Time, gpus []GPU) {
	p.last, p.sent, p.started, p.failed = now, marks(gpus), true, time.Time{}
}

// Failed records a failed publication at now: the next try waits Gap.
func (p *Pacer) Failed(now time.Time) {
	p.failed = now
}
