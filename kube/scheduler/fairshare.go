package scheduler

import (
	"log/slog"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/queueing"
)

// reasonQueueLimit leaves a pod pending because its queue is at its limit.
const reasonQueueLimit = "QueueLimit"

// queueTree builds the queue tree from Queue objects. Invalid objects are
// logged and left out; if the set is inconsistent (a cycle, an unknown
// parent) only the default queue remains, and the error says why.
func queueTree(log *slog.Logger, objs []*unstructured.Unstructured) (*queueing.Tree, error) {
	var qs []queueing.Queue
	for _, o := range objs {
		q, err := queues.FromObject(o)
		if err != nil {
			log.Warn("queue ignored", "err", err)
			continue
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	t, err := queueing.NewTree(qs)
	if err != nil {
		def, _ := queueing.NewTree(nil)
		return def, err
	}
	return t, nil
}

// ledger charges every booked pod and claim to its queue, over the
// snapshot's total.
func (snap *snapshot) ledger(tree *queueing.Tree) *queueing.Ledger {
	return tree.NewLedger(snap.capacity, snap.books.Usage())
}
