package queueing

import (
	"fmt"
	"sort"
)

// Ledger is the usage of every queue during one scheduling round: what its
// own work uses, rolled up to ancestors on demand. It is not safe for
// concurrent use; build one per cycle.
type Ledger struct {
	tree  *Tree
	total Resources
	own   map[string]Resources
}

// NewLedger starts a ledger over the cluster's total resources with each
// queue's own current usage. Usage of unknown queues is charged to the
// default queue.
func (t *Tree) NewLedger(total Resources, own map[string]Resources) *Ledger {
	l := &Ledger{tree: t, total: total, own: map[string]Resources{}}
	for q, r := range own {
		l.Charge(q, r)
	}
	return l
}

func (l *Ledger) resolve(queue string) string {
	if _, ok := l.tree.queues[queue]; ok {
		return queue
	}
	return DefaultQueue
}

// Used is the usage of a queue and all its descendants.
func (l *Ledger) Used(queue string) Resources {
	queue = l.resolve(queue)
	sum := l.own[queue]
	for _, k := range l.tree.kids[queue] {
		sum = sum.Add(l.Used(k))
	}
	return sum
}

// Charge adds r to a queue's own usage.
func (l *Ledger) Charge(queue string, r Resources) {
	queue = l.resolve(queue)
	l.own[queue] = l.own[queue].Add(r)
}

// Release takes r off a queue's own usage.
func (l *Ledger) Release(queue string, r Resources) {
	queue = l.resolve(queue)
	l.own[queue] = l.own[queue].Sub(r)
}

// Admit checks that adding r keeps the queue and every ancestor within its
// hard limit; the error names the queue and the limit.
func (l *Ledger) Admit(queue string, r Resources) error {
	queue = l.resolve(queue)
	for _, q := range l.tree.Ancestry(queue) {
		lim := l.tree.queues[q].Limit
		if after := l.Used(q).Add(r); !after.Fits(lim) {
			return fmt.Errorf("queue %s: would use %+v, over its limit %+v", q, after, lim)
		}
	}
	return nil
}

// Share is a queue's fair-share position (see share): below 1 the queue is
// within its guarantee; above 1, how far over it is, per unit of weight.
func (l *Ledger) Share(queue string) float64 { return l.share(l.resolve(queue)) }

// share is a queue's fair-share position: below its guarantee, how much of
// the guarantee it uses (0..1); above it, 1 plus its over-quota dominant
// share divided by its weight. Lower goes first.
func (l *Ledger) share(queue string) float64 {
	q := l.tree.queues[queue]
	used := l.Used(queue)
	if !q.Guaranteed.IsZero() && !q.Guaranteed.Within(used) {
		return used.DominantShare(q.Guaranteed)
	}
	over := used.Sub(q.Guaranteed)
	over = Resources{max(0, over.GPUMilli), max(0, over.GPUMemoryMiB), max(0, over.CPUMilli), max(0, over.MemoryMiB)}
	return 1 + over.DominantShare(l.total)/float64(q.Weight)
}

// Order sorts queues (by name) into the order their work should be tried:
// hierarchically, comparing siblings at each level by priority (higher
// first), then fair-share position (lower first), then name. A queue whose
// usage grows moves back, so every queue with pending work gets its turn.
func (l *Ledger) Order(queues []string) []string {
	paths := map[string][]string{}
	for _, q := range queues {
		anc := l.tree.Ancestry(l.resolve(q))
		path := make([]string, len(anc))
		for i := range anc {
			path[len(anc)-1-i] = anc[i]
		}
		paths[q] = path
	}
	out := append([]string(nil), queues...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := paths[out[i]], paths[out[j]]
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] == b[k] {
				continue
			}
			return l.less(a[k], b[k])
		}
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return out[i] < out[j]
	})
	return out
}

func (l *Ledger) less(a, b string) bool {
	qa, qb := l.tree.queues[a], l.tree.queues[b]
	if qa.Priority != qb.Priority {
		return qa.Priority > qb.Priority
	}
	sa, sb := l.share(a), l.share(b)
	if sa != sb {
		return sa < sb
	}
	return a < b
}
