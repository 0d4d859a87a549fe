package scheduler

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/queueing"
)

// reasonQueueLimit leaves a pod pending because its queue is at its limit.
const reasonQueueLimit = "QueueLimit"

// queueOf is the pod's queue name: its tessera.io/queue label, else
// KAI's kai.scheduler/queue label, else the queue of its Volcano PodGroup,
// else the default queue.
func (s *Scheduler) queueOf(p *corev1.Pod) string {
	q, _ := s.queueSource(p)
	return q
}

// queueSource is queueOf with where the name came from, for messages.
func (s *Scheduler) queueSource(p *corev1.Pod) (queue, from string) {
	if q := p.Labels[queues.LabelQueue]; q != "" {
		return q, "label " + queues.LabelQueue
	}
	if q := p.Labels[workload.KAILabelQueue]; q != "" {
		return q, "label " + workload.KAILabelQueue
	}
	if name := p.Annotations[workload.VolcanoAnnotationGroupName]; name != "" {
		if g, found, err := s.volcanoGroup(p.Namespace, name); err == nil && found && g.Queue != "" {
			return g.Queue, "spec.queue of Volcano PodGroup " + p.Namespace + "/" + name
		}
	}
	return queueing.DefaultQueue, ""
}

// queueFromGroup reports whether queueSource reads p's queue from its
// Volcano PodGroup (which may change without the pod changing).
func queueFromGroup(p *corev1.Pod) bool {
	return p.Labels[queues.LabelQueue] == "" && p.Labels[workload.KAILabelQueue] == "" && p.Annotations[workload.VolcanoAnnotationGroupName] != ""
}

// queueTree builds the queue tree from Queue objects. Invalid objects are
// logged and left out; if the set is inconsistent (a cycle, an unknown
// parent) only the default queue remains, and the error says why.
func (s *Scheduler) queueTree(objs []*unstructured.Unstructured) (*queueing.Tree, error) {
	var qs []queueing.Queue
	for _, o := range objs {
		q, err := queues.FromObject(o)
		if err != nil {
			s.cfg.Log.Warn("queue ignored", "err", err)
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
func (s *Scheduler) ledger(tree *queueing.Tree, snap *snapshot) *queueing.Ledger {
	return tree.NewLedger(snap.capacity, snap.books.Usage())
}
