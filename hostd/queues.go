package hostd

import (
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/queueing"
)

// queueTree is the queue tree of the configured queues plus, with weight 1
// and no guarantee, every other valid name in names (an invalid one, from
// an older record, is left out: its jobs are served in the default queue,
// queueOf). An invalid configured set (New validates it) falls back to
// flat queues rather than refusing to schedule.
func queueTree(configured []queueing.Queue, names []string) *queueing.Tree {
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
