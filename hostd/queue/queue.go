package queue

import (
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

// Item is a waiting job as the ordering sees it.
type Item struct {
	ID        string
	Queue     string
	Priority  int
	Seq       uint64
	Submitted time.Time
	// Need is what the job takes when it runs (for fair share).
	Need queueing.Resources
}

// Orderer returns waiting items in start order. It must not modify items.
type Orderer interface {
	Order(items []Item, now time.Time) []Item
}

// DefaultAgingStep is the wait that raises a job's effective priority by one.
const DefaultAgingStep = time.Minute

// PriorityFIFO orders by effective priority, then FIFO by Seq.
type PriorityFIFO struct {
	// AgingStep is the wait that adds one to the effective priority; 0
	// turns aging off (strict priority, which can starve low priorities).
	AgingStep time.Duration
}

// Effective is the priority item has at now.
func (p PriorityFIFO) Effective(it Item, now time.Time) int {
	if p.AgingStep <= 0 || it.Submitted.IsZero() || !now.After(it.Submitted) {
		return it.Priority
	}
	return it.Priority + int(now.Sub(it.Submitted)/p.AgingStep)
}

// Order implements Orderer.
func (p PriorityFIFO) Order(items []Item, now time.Time) []Item {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b Item) int {
		ea, eb := p.Effective(a, now), p.Effective(b, now)
		if ea != eb {
			return eb - ea
		}
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out
}
