package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// reasonQueueLimit leaves a pod pending because its queue is at its limit.
const reasonQueueLimit = "QueueLimit"

// fairness is a cycle's queue state, for reclaim decisions (the rule is
// package preemption's).
type fairness = preemption.Fairness

// item is one unit of the scheduling queue: a single pod or a gang.
type item struct {
	pod   *corev1.Pod
	gang  *gang
	queue string
}

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

// ledger charges every booked pod to its queue, over the snapshot's total.
func (s *Scheduler) ledger(tree *queueing.Tree, snap *snapshot) *queueing.Ledger {
	var total queueing.Resources
	for _, n := range snap.cluster.Nodes {
		total.CPUMilli += n.CPUMilli
		total.MemoryMiB += n.MemoryMiB
		for _, g := range n.GPUs {
			total.GPUMilli += request.Whole
			total.GPUMemoryMiB += g.MemoryMiB
		}
	}
	own := map[string]queueing.Resources{}
	for _, bs := range snap.onNode {
		for _, b := range bs {
			q := s.queueOf(b.pod)
			own[q] = own[q].Add(bookedResources(b))
		}
	}
	return tree.NewLedger(total, own)
}

// bookedResources is what a booking takes: its host share and GPU shares.
func bookedResources(b booking) queueing.Resources {
	var r queueing.Resources
	for _, part := range b.parts {
		r.CPUMilli += part.pod.CPUMilli
		r.MemoryMiB += part.pod.MemoryMiB
	}
	if a, err := boundpods.Assignment(b.pod); err == nil && a != nil {
		r = r.Add(shareResources(*a))
	}
	return r
}

func shareResources(a binding.Assignment) queueing.Resources {
	var r queueing.Resources
	for _, c := range a.Containers {
		for _, g := range c.GPUs {
			r.GPUMilli += g.ComputeMilli
			r.GPUMemoryMiB += g.MemoryMiB
		}
	}
	return r
}

// estimate is what a pending pod would take, for the limit check before
// placement (a memory-only share's compute is known only once placed).
func (s *Scheduler) estimate(p *corev1.Pod) queueing.Resources {
	cpu, mem := podHostRequests(p)
	r := queueing.Resources{CPUMilli: cpu, MemoryMiB: mem}
	reqs, err := workload.FromPod(p, s.cfg.Catalog)
	if err != nil {
		return r
	}
	for _, c := range reqs {
		r.GPUMilli += int64(c.GPU.Count) * c.GPU.ComputeMilli
		r.GPUMemoryMiB += int64(c.GPU.Count) * c.GPU.MemoryMiB
	}
	return r
}

// serveQueues schedules the items queue by queue in fair-share order: each
// step takes the head of the queue the ledger puts first, checks its hard
// limits, schedules it and charges what was bound.
func (s *Scheduler) serveQueues(ctx context.Context, snap *snapshot, tree *queueing.Tree, items []item, st *CycleStats) error {
	l := s.ledger(tree, snap)
	byQueue := map[string][]item{}
	for _, it := range items {
		byQueue[it.queue] = append(byQueue[it.queue], it)
	}
	queueing.Serve(l, byQueue, func(_ string, it item) (queueing.Resources, bool) {
		if ctx.Err() != nil {
			return queueing.Resources{}, true
		}
		start, before := time.Now(), *st
		charge := s.serveItem(ctx, snap, tree, l, it, st)
		s.metrics.observeItem(before, *st, start)
		return charge, false
	})
	s.metrics.observeQueues(tree, l)
	return ctx.Err()
}

// serveItem schedules one item and returns what it bound, for its queue.
func (s *Scheduler) serveItem(ctx context.Context, snap *snapshot, tree *queueing.Tree, l *queueing.Ledger, it item, st *CycleStats) queueing.Resources {
	members := []*corev1.Pod{it.pod}
	if it.gang != nil {
		members = it.gang.pending
	}
	if _, ok := tree.Queue(it.queue); !ok {
		_, from := s.queueSource(members[0])
		msg := fmt.Sprintf("%s: queue %q does not exist (create a Queue or drop the label for the default queue)", from, it.queue)
		for _, p := range members {
			s.reject(ctx, it.key(), p, reasonInvalid, msg)
			st.Invalid++
		}
		return queueing.Resources{}
	}
	var need queueing.Resources
	for _, p := range members {
		need = need.Add(s.estimate(p))
	}
	if err := l.Admit(it.queue, need); err != nil {
		for _, p := range members {
			s.reject(ctx, it.key(), p, reasonQueueLimit, err.Error())
			st.Unschedulable++
		}
		return queueing.Resources{}
	}
	bound := st.Bound
	if it.gang != nil {
		s.scheduleGang(ctx, snap, it.gang, st)
	} else {
		st.count(s.scheduleOne(ctx, snap, it.pod, &fairness{Tree: tree, Ledger: l}, it.key()))
	}
	var charge queueing.Resources
	if st.Bound > bound {
		for _, p := range members {
			if b, ok := snap.bookingOf(p); ok {
				charge = charge.Add(bookedResources(b))
			}
		}
	}
	return charge
}
