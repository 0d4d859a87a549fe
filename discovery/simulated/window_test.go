package simulated

import (
	"errors"
	"testing"
	"time"
)

// TestWindow: the first reading of a GPU only starts its span (the loads
// are not read); the next covers the time since, each key busy as its
// load says and a key without one not at all; GPUs keep their own spans;
// a clock that did not move starts nothing; a failed read of the loads is
// returned.
func TestWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	half := Started{Start: t0, Load: Load{BusyMilli: 500}}
	loads := func() (map[string]Started, error) { return map[string]Started{"a": half}, nil }
	var w Window
	if span, busy, err := w.Busy("gpu-0", t0, []string{"a"}, func() (map[string]Started, error) {
		t.Fatal("loads read at the first reading")
		return nil, nil
	}); span != 0 || busy != nil || err != nil {
		t.Fatalf("first reading: %v %v %v", span, busy, err)
	}
	span, busy, err := w.Busy("gpu-0", t0.Add(10*time.Second), []string{"a", "b"}, loads)
	if err != nil || span != 10*time.Second || busy["a"] != 5*time.Second || busy["b"] != 0 {
		t.Errorf("second reading: span %v, busy %v, err %v; want 10s, a 5s, b 0", span, busy, err)
	}
	if span, _, _ := w.Busy("gpu-1", t0.Add(10*time.Second), []string{"a"}, loads); span != 0 {
		t.Errorf("another GPU's first reading: span %v, want 0", span)
	}
	if span, _, _ := w.Busy("gpu-0", t0.Add(10*time.Second), []string{"a"}, loads); span != 0 {
		t.Errorf("a clock that did not move: span %v, want 0", span)
	}
	boom := errors.New("boom")
	if _, _, err := w.Busy("gpu-0", t0.Add(20*time.Second), []string{"a"}, func() (map[string]Started, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("failed loads: %v", err)
	}
}
