package dispatch

import (
	"testing"
	"time"
)

// TestBackoffDelay: the n-th failure in a row waits initial·2ⁿ⁻¹, capped.
func TestBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		name         string
		initial, max time.Duration
		attempts     int
		want         time.Duration
	}{
		{"first failure", time.Second, 10 * time.Second, 1, time.Second},
		{"second doubles", time.Second, 10 * time.Second, 2, 2 * time.Second},
		{"third", time.Second, 10 * time.Second, 3, 4 * time.Second},
		{"fourth", time.Second, 10 * time.Second, 4, 8 * time.Second},
		{"fifth reaches the cap", time.Second, 10 * time.Second, 5, 10 * time.Second},
		{"stays at the cap", time.Second, 10 * time.Second, 60, 10 * time.Second},
		{"cap below initial", time.Second, 500 * time.Millisecond, 1, 500 * time.Millisecond},
		{"cap equal to initial", time.Second, time.Second, 3, time.Second},
		{"configured", 100 * time.Millisecond, 250 * time.Millisecond, 2, 200 * time.Millisecond},
		{"configured, capped", 100 * time.Millisecond, 250 * time.Millisecond, 3, 250 * time.Millisecond},
		{"no overflow far past the cap", time.Second, time.Hour, 1000, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newBackoff(tc.initial, tc.max).delay(tc.attempts); got != tc.want {
				t.Errorf("delay(%d) = %v, want %v", tc.attempts, got, tc.want)
			}
		})
	}
}

// TestBackoffQueue drives one key through failures, repeats, cluster
// changes and resets with a fixed clock.
func TestBackoffQueue(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		do   string // fail, error, cluster, endwait, forget, or "" (only check)
		at   float64
		wait bool // waiting(key) at `at`, after the step
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"untried key is not waiting", []step{{"", 0, false}}},
		{"failures double the wait", []step{
			{"fail", 0, true}, {"", 0.99, true}, {"", 1, false},
			{"fail", 1, true}, {"", 2.99, true}, {"", 3, false},
			{"fail", 3, true}, {"", 6.99, true}, {"", 7, false},
		}},
		{"the wait is capped", []step{
			{"fail", 0, true}, {"fail", 1, true}, {"fail", 3, true}, {"fail", 7, true}, {"fail", 15, true},
			{"", 24.99, true}, {"", 25, false}, {"fail", 25, true}, {"", 34.99, true}, {"", 35, false},
		}},
		{"a repeat while waiting does not count", []step{
			{"fail", 0, true}, {"fail", 0.5, true}, {"", 1, false}, // still the first wait of 1s
			{"fail", 1, true}, {"", 2.99, true}, {"", 3, false}, // the second failure: 2s
		}},
		{"success forgets the count", []step{
			{"fail", 0, true}, {"fail", 1, true}, {"forget", 1.5, false}, {"fail", 3, true}, {"", 4, false},
		}},
		{"a cluster change ends a misfit's wait, keeping its count", []step{
			{"fail", 0, true}, {"fail", 1, true}, {"cluster", 1.5, false}, {"fail", 1.5, true}, {"", 5.49, true}, {"", 5.5, false},
		}},
		{"a cluster change does not shorten an error's wait", []step{
			{"error", 0, true}, {"cluster", 0.5, true}, {"", 1, false},
		}},
		{"an error reported during a misfit's wait is not cut short", []step{
			{"fail", 0, true}, {"error", 0.2, true}, {"cluster", 0.5, true}, {"", 1, false},
		}},
		{"endWait ends a misfit's wait", []step{{"fail", 0, true}, {"endwait", 0.1, false}}},
		{"endWait leaves an error's wait", []step{{"error", 0, true}, {"endwait", 0.1, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(time.Second, 10*time.Second)
			const key = "pod/u1"
			b.failed("pod/other", failedToFit, t0) // another key never interferes
			for i, s := range tc.steps {
				now := at(s.at)
				switch s.do {
				case "fail":
					b.failed(key, failedToFit, now)
				case "error":
					b.failed(key, failedWithError, now)
				case "cluster":
					b.clusterChanged()
				case "endwait":
					b.endWait(key)
				case "forget":
					b.forget(key)
				}
				if got := b.waiting(key, now); got != s.wait {
					t.Fatalf("step %d (%s at %vs): waiting = %v, want %v", i, s.do, s.at, got, s.wait)
				}
			}
		})
	}
}

// TestBackoffNext: next names the earliest wait still running.
func TestBackoffNext(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBackoff(time.Second, 10*time.Second)
	if _, ok := b.next(t0); ok {
		t.Fatal("next on an empty queue: ok")
	}
	b.failed("a", failedToFit, t0)
	b.failed("b", failedToFit, t0)
	b.failed("b", failedToFit, t0.Add(time.Second)) // b now waits until t0+3s
	if at, ok := b.next(t0.Add(500 * time.Millisecond)); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("next = %v, %v; want t0+1s (a)", at, ok)
	}
	if at, ok := b.next(t0.Add(2 * time.Second)); !ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("next = %v, %v; want t0+3s (b)", at, ok)
	}
	b.forget("b")
	if b.has("b") || !b.has("a") {
		t.Fatal("forget dropped the wrong key")
	}
}
