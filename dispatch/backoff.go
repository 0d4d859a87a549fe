package dispatch

import "time"

// failure says what may end a backoff early.
type failure int

const (
	// failedToFit: the cycle turned the workload down (it fits nowhere, its
	// queue is full, it is invalid as written). A change of the cluster may
	// help, so one ends the wait.
	failedToFit failure = iota
	// failedWithError: applying the decision failed (the binding was
	// refused). Only time helps: cluster changes do not end the wait.
	failedWithError
)

// backoff is the retry queue of workloads and gangs (by key) that failed,
// as kube-scheduler's backoff queue: the n-th failure in a row delays the
// next attempt by initial·2ⁿ⁻¹, at most max. A failure reported while the
// key still waits (another member of the same gang, the same attempt seen
// twice) does not count again. Success forgets the key; a change of the
// workload itself starts its count over; a change of the cluster ends the
// wait of keys that failed to fit (their count is kept, so one that still
// does not fit waits longer next time). With initial 0 nothing waits.
type backoff struct {
	initial, max time.Duration
	entries      map[string]backoffEntry
}

type backoffEntry struct {
	attempts int
	until    time.Time
	why      failure
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, entries: map[string]backoffEntry{}}
}

// delay is the wait after the given number of failures in a row (>= 1).
func (b *backoff) delay(attempts int) time.Duration {
	d := b.initial
	for i := 1; i < attempts && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// failed records a failed attempt for key at now and returns how long the
// key now waits.
func (b *backoff) failed(key string, why failure, now time.Time) time.Duration {
	if b.initial <= 0 {
		return 0
	}
	e := b.entries[key]
	if e.attempts > 0 && now.Before(e.until) {
		// The same attempt reported again: keep the wait, but an error is
		// never cut short by cluster changes.
		e.why = max(e.why, why)
		b.entries[key] = e
		return e.until.Sub(now)
	}
	e.attempts++
	e.why = why
	d := b.delay(e.attempts)
	e.until = now.Add(d)
	b.entries[key] = e
	return d
}

// waiting reports whether key must not be tried at now.
func (b *backoff) waiting(key string, now time.Time) bool {
	e, ok := b.entries[key]
	return ok && now.Before(e.until)
}

// until is when key may be tried again (zero when it may now, or never
// failed).
func (b *backoff) until(key string) time.Time { return b.entries[key].until }

// forget drops keys (succeeded, or changed by their owner: a fresh start).
func (b *backoff) forget(keys ...string) {
	for _, k := range keys {
		delete(b.entries, k)
	}
}

// has reports whether key has failed since it last succeeded.
func (b *backoff) has(key string) bool {
	_, ok := b.entries[key]
	return ok
}

// endWait lets key be tried at once if it failed to fit (its count is kept).
func (b *backoff) endWait(key string) {
	if e, ok := b.entries[key]; ok && e.why == failedToFit {
		e.until = time.Time{}
		b.entries[key] = e
	}
}

// clusterChanged ends the wait of every key that failed to fit.
func (b *backoff) clusterChanged() {
	for k, e := range b.entries {
		if e.why == failedToFit && !e.until.IsZero() {
			e.until = time.Time{}
			b.entries[k] = e
		}
	}
}

// next is when the first key still waiting at now may be tried; ok is
// false when none is waiting.
func (b *backoff) next(now time.Time) (at time.Time, ok bool) {
	for _, e := range b.entries {
		if !now.Before(e.until) {
			continue
		}
		if !ok || e.until.Before(at) {
			at, ok = e.until, true
		}
	}
	return at, ok
}
