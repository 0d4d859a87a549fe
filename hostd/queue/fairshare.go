package queue

import (
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

// UsageOrderer is an Orderer that also needs what each queue's running
// jobs use; the daemon calls OrderWithUsage when its orderer has it.
type UsageOrderer interface {
	Orderer
	OrderWithUsage(items []Item, now time.Time, total queueing.Resources, used map[string]queueing.Resources) []Item
}

// FairShare orders waiting jobs across queues by the same fair-share rules
// as the Kubernetes scheduler (package queueing: priority, then DRF over
// guaranteed and over-quota shares): each step takes the head of the queue
// the ledger puts first and charges its job's need, so queues take turns in
// proportion to their weights. Within a queue, Within orders (priority with
// aging, then FIFO).
type FairShare struct {
	Within PriorityFIFO
	// Queues defines queues with guarantees, weights and priorities; any
	// other queue name gets weight 1 and no guarantee.
	Queues []queueing.Queue
}

// Order implements Orderer without usage (every queue starts even).
func (f FairShare) Order(items []Item, now time.Time) []Item {
	return f.OrderWithUsage(items, now, queueing.Resources{}, nil)
}

// OrderWithUsage implements UsageOrderer.
func (f FairShare) OrderWithUsage(items []Item, now time.Time, total queueing.Resources, used map[string]queueing.Resources) []Item {
	tree := f.tree(items, used)
	if total.IsZero() {
		for _, it := range items {
			total = total.Add(it.Need)
		}
	}
	l := tree.NewLedger(total, used)
	byQueue := map[string][]Item{}
	for _, it := range f.Within.Order(items, now) {
		byQueue[queueName(it)] = append(byQueue[queueName(it)], it)
	}
	out := make([]Item, 0, len(items))
	queueing.Serve(l, byQueue, func(_ string, it Item) (queueing.Resources, bool) {
		out = append(out, it)
		return it.Need, false
	})
	return out
}

// tree defines the configured queues plus every other name in use.
func (f FairShare) tree(items []Item, used map[string]queueing.Resources) *queueing.Tree {
	qs := slices.Clone(f.Queues)
	known := map[string]bool{}
	for _, q := range qs {
		known[q.Name] = true
	}
	add := func(name string) {
		if !known[name] {
			known[name] = true
			qs = append(qs, queueing.Queue{Name: name, Weight: 1})
		}
	}
	for _, it := range items {
		add(queueName(it))
	}
	for name := range used {
		add(name)
	}
	t, err := queueing.NewTree(qs)
	if err != nil {
		// Names are validated at submission; an invalid configured set
		// falls back to flat queues rather than refusing to order.
		flat := make([]queueing.Queue, 0, len(known))
		for name := range known {
			flat = append(flat, queueing.Queue{Name: name, Weight: 1})
		}
		t, _ = queueing.NewTree(flat)
	}
	return t
}

func queueName(it Item) string {
	if it.Queue == "" {
		return queueing.DefaultQueue
	}
	return it.Queue
}
