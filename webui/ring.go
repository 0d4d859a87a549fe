package webui

// Ring is a fixed-capacity buffer that keeps the latest values pushed: once
// full, each Push overwrites the oldest. It is not safe for concurrent use
// (History adds a lock).
type Ring[T any] struct {
	buf []T
	// start is the oldest value's slot; n the number of values held.
	start, n int
}

// NewRing returns an empty ring that holds up to capacity values; a
// capacity below 1 holds one.
func NewRing[T any](capacity int) *Ring[T] {
	return &Ring[T]{buf: make([]T, max(capacity, 1))}
}

// Push adds v as the newest value, dropping the oldest when full.
func (r *Ring[T]) Push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return r.n }

// Cap is the most values the ring holds.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// At returns the i-th value, oldest first (0 <= i < Len).
func (r *Ring[T]) At(i int) T {
	if i < 0 || i >= r.n {
		panic("webui: Ring.At index out of range")
	}
	return r.buf[(r.start+i)%len(r.buf)]
}

// Last returns the newest value, false when empty.
func (r *Ring[T]) Last() (T, bool) {
	if r.n == 0 {
		var zero T
		return zero, false
	}
	return r.At(r.n - 1), true
}

// Items returns a copy of the values, oldest first.
func (r *Ring[T]) Items() []T {
	out := make([]T, r.n)
	for i := range out {
		out[i] = r.At(i)
	}
	return out
}
