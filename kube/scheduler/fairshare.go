package scheduler

import (
	"log/slog"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/queueing"
)

// reasonQueueLimit leaves a pod pending because its queue is at its limit.
const reasonQueueLimit = "QueueLimit"

// queueTree builds the queue tree from Queue objects (kube/queues.Tree),
// logging those left out; if the set is inconsistent only the default
// queue remains, and the error says why.
func queueTree(log *slog.Logger, objs []*unstructured.Unstructured) (*queueing.Tree, error) {
	t, skipped, err := queues.Tree(objs)
	for _, e := range skipped {
		log.Warn("queue ignored", "err", e)
	}
	return t, err
}

// ledger charges every booked pod and claim to its queue, over the
// snapshot's total.
func (snap *snapshot) ledger(tree *queueing.Tree) *queueing.Ledger {
	return tree.NewLedger(snap.capacity, snap.books.Usage())
}
