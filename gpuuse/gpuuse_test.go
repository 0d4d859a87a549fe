package gpuuse

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// feed adds readings of step each, busy for frac of each, from *at on, for d.
func feed(tr *Tracker, at *time.Time, d, step time.Duration, frac float64, rule IdleRule) {
	for end := at.Add(step); !end.After(at.Add(d)); end = end.Add(step) {
		tr.Add(end, step, time.Duration(frac*float64(step)), 10*time.Second, Measured, rule)
	}
	*at = at.Add(d)
}

func TestTrackerWindowsAndIdleNotBefore(t *testing.T) {
	rule := IdleRule{BelowMilli: 50, After: 10 * time.Minute}
	var tr Tracker
	at := t0
	if tr.Add(at.Add(time.Second), time.Second, time.Second, 10*time.Second, Measured, rule) {
		t.Fatal("a window closed after 1 s of a 10 s window")
	}
	if u := tr.Last(); u.Source != "" || u.BusyMilli != nil {
		t.Fatalf("Last before any window = %+v, want none", u)
	}
	at = at.Add(time.Second)
	feed(&tr, &at, 59*time.Second, time.Second, 0.6, rule) // busy first minute
	u := tr.Last()
	if u.BusyMilli == nil || *u.BusyMilli != 600 || !u.At.Equal(t0.Add(time.Minute)) || !u.From.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("Last = %+v, want 600 milli over [50s, 60s]", u)
	}
	if *u.BusyMilli != 600 || u.Source != Measured {
		t.Fatalf("source %q", u.Source)
	}
	// Near zero from 1 min on: idle at 11 min, not at 10:50.
	feed(&tr, &at, 9*time.Minute+50*time.Second, time.Second, 0.01, rule)
	if i := tr.Idle(rule); i != nil {
		t.Fatalf("idle at %v after %v below the threshold: %+v", at, at.Sub(t0.Add(time.Minute)), i)
	}
	feed(&tr, &at, 10*time.Second, time.Second, 0.01, rule)
	i := tr.Idle(rule)
	if i == nil || !i.Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Idle at %v = %+v, want idle since %v", at, i, t0.Add(time.Minute))
	}
	// One busy window ends it; the next quiet run starts over.
	feed(&tr, &at, 10*time.Second, time.Second, 0.5, rule)
	if i := tr.Idle(rule); i != nil {
		t.Fatalf("still idle after a busy window: %+v", i)
	}
	feed(&tr, &at, 10*time.Minute, time.Second, 0, rule)
	if i := tr.Idle(rule); i == nil || !i.Since.Equal(at.Add(-10*time.Minute)) {
		t.Fatalf("Idle = %+v, want since %v", i, at.Add(-10*time.Minute))
	}
}

func TestTrackerClampsBusy(t *testing.T) {
	var tr Tracker
	rule := IdleRule{}.WithDefaults()
	tr.Add(t0, 10*time.Second, 30*time.Second, 10*time.Second, Simulated, rule)
	if u := tr.Last(); u.BusyMilli == nil || *u.BusyMilli != 1000 || u.Source != Simulated {
		t.Fatalf("Last = %+v, want 1000 milli simulated", u)
	}
}

func TestGPUSumLabels(t *testing.T) {
	busy := func(m int64) *int64 { return &m }
	g := GPU{Shares: []Share{
		{Booked: Booked{GuaranteedMilli: 300, LimitMilli: 500, MemoryMiB: 10, MemoryLimitMiB: 20}, Use: Use{Source: Simulated, BusyMilli: busy(200), MemoryUsedMiB: busy(7), From: t0, At: t0.Add(10 * time.Second)}},
		{Booked: Booked{GuaranteedMilli: 200, LimitMilli: 200}, Use: NotMetered("a MIG instance")},
		{Booked: Booked{GuaranteedMilli: 100, LimitMilli: 100}, Use: Use{Source: Measured, BusyMilli: busy(900), From: t0.Add(time.Second), At: t0.Add(11 * time.Second)}},
	}}
	g.Sum("no job")
	if g.Booked != (Booked{GuaranteedMilli: 600, LimitMilli: 800, MemoryMiB: 10, MemoryLimitMiB: 20}) {
		t.Errorf("Booked = %+v", g.Booked)
	}
	if g.Use.Source != Simulated || *g.Use.BusyMilli != 1000 || *g.Use.MemoryUsedMiB != 7 || !g.Use.At.Equal(t0.Add(11*time.Second)) || !g.Use.From.Equal(t0) {
		t.Errorf("Use = %+v, want simulated (any simulated share makes it so), busy capped at 1000", g.Use)
	}
	empty := GPU{}
	empty.Sum("no job holds it")
	if empty.Use.Source != None || empty.Use.Reason != "not metered: no job holds it" {
		t.Errorf("bare GPU Use = %+v", empty.Use)
	}
	unmetered := GPU{Shares: []Share{{Use: NotMetered("no GPU utilisation meter")}}}
	unmetered.Sum("x")
	if unmetered.Use.Source != None || !strings.Contains(unmetered.Use.Reason, "no GPU utilisation meter") {
		t.Errorf("unmetered GPU Use = %+v", unmetered.Use)
	}
}

func TestIdleRuleValidate(t *testing.T) {
	if err := (IdleRule{}).WithDefaults().Validate("b", "a"); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	err := IdleRule{BelowMilli: 50, After: 5 * time.Second}.Validate("--idle-below", "--idle-after")
	if err == nil || !strings.Contains(err.Error(), "--idle-after") || !strings.Contains(err.Error(), "[1m0s, 168h0m0s]") || !strings.Contains(err.Error(), "5s") {
		t.Errorf("After 5s: %v, want the field, range and value", err)
	}
	err = IdleRule{BelowMilli: 900, After: time.Hour}.Validate("--idle-below", "--idle-after")
	if err == nil || !strings.Contains(err.Error(), "--idle-below: must be in [0.001, 0.500] of a GPU, got 0.900") {
		t.Errorf("Below 0.9: %v", err)
	}
}
