package queue

import (
	"slices"
	"strings"
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
	names := make([]string, 0, len(items)+len(used))
	for _, it := range items {
		names = append(names, queueName(it))
	}
	for name := range used {
		names = append(names, name)
	}
	return Tree(f.Queues, names)
}

// Tree is the queue tree of the configured queues plus, with weight 1 and
// no guarantee, every other valid name in names (an invalid one, from an
// older record, is left out: the ledger charges it to the default queue).
// An invalid configured set (the daemon validates it at start) falls back
// to flat queues rather than refusing to order.
func Tree(configured []queueing.Queue, names []string) *queueing.Tree {
	qs := slices.Clone(configured)
	known := map[string]bool{}
	for _, q := range qs {
		known[q.Name] = true
	}
	for _, name := range names {
		if !known[name] && queueing.ValidName(name) {
			known[name] = true
			qs = append(qs, queueing.Queue{Name: name, Weight: 1})
		}
	}
	t, err := queueing.NewTree(qs)
	if err != nil {
		flat := make([]queueing.Queue, 0, len(known))
		for name := range known {
			flat = append(flat, queueing.Queue{Name: name, Weight: 1})
		}
		slices.SortFunc(flat, func(a, b queueing.Queue) int { return strings.Compare(a.Name, b.Name) })
		if t, err = queueing.NewTree(flat); err != nil {
			t, _ = queueing.NewTree(nil) // the default queue alone always builds
		}
	}
	return t
}

func queueName(it Item) string {
	if it.Queue == "" {
		return queueing.DefaultQueue
	}
	return it.Queue
}
