package webui

import (
	"sync"
	"time"
)

// Defaults for the chart history: a sample every 10 s for the last 6
// hours (2,160 samples, about 200 KB).
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultHistorySpan    = 6 * time.Hour
)

// Sample is one chart point: the totals of one Snapshot.
type Sample struct {
	Time time.Time `json:"t"`
	Capacity
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// GPUs is each GPU's guaranteed compute booked, in Snapshot.GPUs
	// order; nil for more than MaxSampledGPUs GPUs.
	GPUs []int64 `json:"gpus"`
}

// MaxSampledGPUs bounds the GPUs whose booking each sample keeps: beyond
// it (a cluster of hundreds of GPUs) the history keeps the totals only, so
// that it stays a few MB (Prometheus keeps each GPU's series).
const MaxSampledGPUs = 256

// SampleOf is s as a chart point (s summarized).
func SampleOf(s Snapshot) Sample {
	t := s.Totals
	out := Sample{Time: s.Time, Capacity: t.Capacity, Running: t.Running, Waiting: t.Waiting}
	if t.MeasuredMilli != nil {
		m := *t.MeasuredMilli
		out.MeasuredMilli = &m
	}
	if t.SimulatedMilli != nil {
		m := *t.SimulatedMilli
		out.SimulatedMilli = &m
	}
	if len(s.GPUs) <= MaxSampledGPUs {
		out.GPUs = make([]int64, len(s.GPUs))
		for i, g := range s.GPUs {
			out.GPUs[i] = g.GuaranteedMilli
		}
	}
	return out
}

// HistoryInfo tells the page how the history is sampled and when its
// newest sample was taken, so it fetches new ones only when there are.
type HistoryInfo struct {
	IntervalSeconds float64    `json:"intervalSeconds"`
	SpanSeconds     float64    `json:"spanSeconds"`
	Len             int        `json:"len"`
	Last            *time.Time `json:"last,omitempty"`
}

// History keeps the chart samples of the last span, one per interval, in a
// Ring; it is safe for concurrent use.
type History struct {
	interval, span time.Duration

	mu   sync.Mutex
	ring *Ring[Sample]
}

// NewHistory keeps span/interval samples (defaults for values <= 0).
func NewHistory(interval, span time.Duration) *History {
	if interval <= 0 {
		interval = DefaultSampleInterval
	}
	if span <= 0 {
		span = DefaultHistorySpan
	}
	return &History{interval: interval, span: span, ring: NewRing[Sample](int(span / interval))}
}

// Interval is the sampling interval.
func (h *History) Interval() time.Duration { return h.interval }

// Record adds s. A sample not later than the newest one held replaces
// nothing and is dropped (the clock stepped back), so the samples stay in
// time order.
func (h *History) Record(s Sample) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.ring.Last(); ok && !s.Time.After(last.Time) {
		return false
	}
	h.ring.Push(s)
	return true
}

// Since returns the samples taken after t (all for the zero time), oldest
// first.
func (h *History) Since(t time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.ring.Len()
	// Samples are in time order: find the first after t.
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if h.ring.At(mid).Time.After(t) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	out := make([]Sample, 0, n-lo)
	for i := lo; i < n; i++ {
		out = append(out, h.ring.At(i))
	}
	return out
}

// Info describes the history for the page.
func (h *History) Info() HistoryInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	info := HistoryInfo{IntervalSeconds: h.interval.Seconds(), SpanSeconds: h.span.Seconds(), Len: h.ring.Len()}
	if last, ok := h.ring.Last(); ok {
		t := last.Time
		info.Last = &t
	}
	return info
}
