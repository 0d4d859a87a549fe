package gpuuse

import "time"

// Tracker folds one share's readings into windows of busy time and tracks
// the idle rule over the closed windows. The zero value is ready; it reads
// no clock: each reading says when it ended.
type Tracker struct {
	busy, span time.Duration
	from       time.Time
	last       Use
	// below is when the current run of windows under the threshold began
	// (zero when the last window was at or above it).
	below time.Time
}

// Add counts a reading that ended at end and covered span, in which the
// share was busy for busy, from source src. Once the readings since the
// last window span window, they close a new one: Last returns it and the
// idle rule is applied to it. It reports whether a window closed.
func (t *Tracker) Add(end time.Time, span, busy, window time.Duration, src Source, rule IdleRule) bool {
	if span <= 0 {
		return false
	}
	if t.span == 0 {
		t.from = end.Add(-span)
	}
	t.span += span
	t.busy += min(max(busy, 0), span)
	if t.span < window {
		return false
	}
	milli := (1000*int64(t.busy) + int64(t.span)/2) / int64(t.span)
	t.last = Use{Source: src, BusyMilli: &milli, From: t.from, At: end}
	switch {
	case milli >= rule.BelowMilli:
		t.below = time.Time{}
	case t.below.IsZero():
		t.below = t.from
	}
	t.busy, t.span = 0, 0
	return true
}

// Last is the last closed window (Source "" before the first).
func (t *Tracker) Last() Use {
	u := t.last
	if u.BusyMilli != nil {
		m := *u.BusyMilli
		u.BusyMilli = &m
	}
	return u
}

// Idle is set when the closed windows have stayed below rule's threshold
// for at least rule.After, counted to the end of the last one.
func (t *Tracker) Idle(rule IdleRule) *Idle {
	if t.below.IsZero() || t.last.At.Sub(t.below) < rule.After {
		return nil
	}
	return &Idle{Since: t.below}
}
