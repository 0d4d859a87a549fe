package scheduler

import (
	"sync"
	"time"
)

// Default retry delays of a pod (or gang) that could not be bound; the same
// as kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds.
const (
	DefaultPodInitialBackoff = time.Second
	DefaultPodMaxBackoff     = 10 * time.Second
)

// failure says what may end a backoff early.
type failure int

const (
	// failedToFit: the scheduler itself turned the pod down (it fits
	// nowhere, its queue is full, its request is invalid; an incomplete
	// gang is not backed off, see apply). A change of the cluster may help, so one ends the wait.
	failedToFit failure = iota
	// failedWithError: the API refused the binding or the assignment could
	// not be recorded. Only time helps: cluster changes do not end the wait.
	failedWithError
)

// backoff is the retry queue of pods and gangs (by block key) that failed
// to be bound, as kube-scheduler's backoff queue: the n-th failure in a row
// delays the next attempt by initial·2ⁿ⁻¹, at most max. A failure reported
// while the key is still waiting (another member of the same gang, the
// same attempt seen twice) does not count again. Success forgets the key;
// a change of the pod itself starts its count over; a change of the
// cluster that may help ends the wait of keys that failed to fit (their
// count is kept, so one that still does not fit waits longer next time).
// It is safe for concurrent use: binding workers and informer handlers
// report to it.
type backoff struct {
	initial, max time.Duration

	mu      sync.Mutex
	entries map[string]backoffEntry
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
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e.attempts > 0 && now.Before(e.until) {
		// Same attempt reported again: keep the wait, but an error is
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
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	return ok && now.Before(e.until)
}

// forget drops keys (bound, or changed by their owner: a fresh start).
func (b *backoff) forget(keys ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		delete(b.entries, k)
	}
}

// empty reports whether no key has failed since it last succeeded.
func (b *backoff) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries) == 0
}

// has reports whether key has failed since it last succeeded.
func (b *backoff) has(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.entries[key]
	return ok
}

// endWait lets key be tried at once if it failed to fit (its count is kept).
func (b *backoff) endWait(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok && e.why == failedToFit {
		e.until = time.Time{}
		b.entries[key] = e
	}
}

// clusterChanged ends the wait of every key that failed to fit.
func (b *backoff) clusterChanged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if e.why == failedToFit && !e.until.IsZero() {
			e.until = time.Time{}
			b.entries[k] = e
		}
	}
}

// next returns how long until the first key still waiting at now may be
// tried; ok is false when none is waiting.
func (b *backoff) next(now time.Time) (d time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.entries {
		if !now.Before(e.until) {
			continue
		}
		if w := e.until.Sub(now); !ok || w < d {
			d, ok = w, true
		}
	}
	return d, ok
}

// retain forgets the keys live does not keep (pods and gangs that are gone
// or no longer pending) and returns how many remain.
func (b *backoff) retain(live map[string]bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if !live[k] {
			delete(b.entries, k)
		}
	}
	return len(b.entries)
}
