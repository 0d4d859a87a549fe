package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/membership"
)

// The pods a cycle looks at are those the informer's events marked since
// the last cycle (every pod when the snapshot is new): a pod that waits
// for this scheduler joins the pending set and the core; one bound (or
// assumed) is booked; one gone, finished or no longer ours leaves both.
// A cycle's cost follows what changed, not how many pods run.

// podEvents pokes the loop on pod events a cycle must act on (additions,
// deletions, podUpdateMatters) and ends waits when the event
// may help: a pod that held resources is deleted or finishes (room for
// the pods that did not fit), a gang gains a pending member (it may now be
// complete), or a waiting pod's own spec, labels or annotations change (a
// fixed request: its count starts over).
func (e *informerEvents) podEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { // a gang's new member ends its wait (the core's Add)
			e.pods.mark(obj)
			e.poke()
		},
		UpdateFunc: func(o, n any) {
			e.pods.mark(n)
			old, okOld := o.(*corev1.Pod)
			cur, okNew := n.(*corev1.Pod)
			switch {
			case !okOld || !okNew:
			case boundpods.Occupies(old) && !boundpods.Occupies(cur):
				e.inbox.clusterChanged()
			case waitsFor(e.name, cur):
				e.podChanged(old, cur)
			}
			if !okOld || !okNew || e.podUpdateMatters(old, cur) {
				e.poke()
			}
		},
		DeleteFunc: func(obj any) {
			e.pods.mark(obj)
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); !ok || boundpods.Occupies(p) {
				e.inbox.clusterChanged()
			}
			e.poke()
		},
	}
}

// podUpdateMatters reports whether a pod update may change what a cycle
// does, so that the loop runs one: a pod waiting for this scheduler (or no
// longer), one that starts or stops occupying its node, and a bound pod
// whose booking or queue changed. Status updates of bound pods (phase,
// conditions, container states: most of a busy cluster's pod events)
// change nothing a cycle reads; the next cycle takes them in anyway.
func (e *informerEvents) podUpdateMatters(old, cur *corev1.Pod) bool {
	if waitsFor(e.name, old) || waitsFor(e.name, cur) {
		return true
	}
	occOld, occCur := boundpods.Occupies(old), boundpods.Occupies(cur)
	if occOld != occCur {
		return true
	}
	if !occCur {
		return false // neither waits for us nor holds anything
	}
	return boundpods.HoldKey(old) != boundpods.HoldKey(cur) || e.members.Queue(old) != e.members.Queue(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil)
}

// podChanged starts a waiting pod's backoff over when the pod itself
// changed (not its conditions, which this scheduler writes), or the
// claims made from its templates did (kube-controller-manager names them
// in its status).
func (e *informerEvents) podChanged(old, cur *corev1.Pod) {
	if maps.Equal(old.Labels, cur.Labels) && maps.Equal(old.Annotations, cur.Annotations) && equality.Semantic.DeepEqual(old.Spec, cur.Spec) &&
		resourceclaim.PodStatusEqual(old.Status.ResourceClaimStatuses, cur.Status.ResourceClaimStatuses) {
		return
	}
	e.inbox.podRespecified(cur.Namespace + "/" + cur.Name)
}

// takePods takes in the pods marked since the last cycle, or every pod
// with all.
func (s *Scheduler) takePods(snap *snapshot, all bool) error {
	keys := s.changedPods.take()
	if all {
		pods, err := s.pods.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		s.takeListed(snap, pods)
		s.relabelVolatile(snap)
		return nil
	}
	for key := range keys {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		if p, err := s.pods.Pods(ns).Get(name); err == nil {
			s.takePod(snap, p)
		} else {
			s.podGone(snap, key)
		}
	}
	s.relabelVolatile(snap)
	return nil
}

// relabelVolatile reads again the queue and gang of the booked pods that
// take them from another object (a Volcano PodGroup, a Job, a Workload
// API PodGroup), which may change without the pod.
func (s *Scheduler) relabelVolatile(snap *snapshot) {
	for id := range snap.volatile {
		p := snap.pods[id]
		snap.books.Relabel(id, s.members.Queue(p), s.members.Gang(p))
	}
}

// takeListed takes in every pod listed and forgets those not listed
// (pods this scheduler bound that the informer does not show yet stay
// booked).
func (s *Scheduler) takeListed(snap *snapshot, pods []*corev1.Pod) {
	seen := make(map[string]bool, len(pods))
	for _, p := range pods {
		seen[p.Namespace+"/"+p.Name] = true
		s.takePod(snap, p)
	}
	for id := range s.pending {
		if !seen[id] {
			s.podGone(snap, id)
		}
	}
	for id := range snap.pods {
		if _, inFlight := s.assumed[id]; !seen[id] && !inFlight {
			s.podGone(snap, id)
		}
	}
	for id, p := range s.assumed {
		if _, booked := snap.pods[id]; !booked { // a snapshot built anew
			s.bookPod(snap, p)
		}
	}
}

// takePod takes in a pod as the informer shows it now.
func (s *Scheduler) takePod(snap *snapshot, p *corev1.Pod) {
	id := p.Namespace + "/" + p.Name
	if old := s.podNamed(snap, id); old != nil && old.UID != p.UID {
		s.podGone(snap, id) // deleted and made again under its name since the last cycle
	}
	switch {
	case boundpods.Occupies(p):
		s.leavePending(id)
		delete(s.assumed, id)
		if snap.pods[id] != p {
			s.bookPod(snap, p)
		}
	case waitsFor(s.cfg.Name, p):
		s.pending[id] = p
		if _, inFlight := s.assumed[id]; !inFlight {
			s.core.Add(s.itemOf(p))
		}
	default: // finished, being deleted, or another scheduler's
		s.podGone(snap, id)
	}
}

// bookPod books p, bound or assumed, with its queue and gang, as a
// preemption candidate when it is this scheduler's and not being deleted.
func (s *Scheduler) bookPod(snap *snapshot, p *corev1.Pod) {
	id := p.Namespace + "/" + p.Name
	h, err := boundpods.Hold(p)
	h.Queue, h.Gang = s.members.Queue(p), s.members.Gang(p)
	h.Stopping = p.Spec.SchedulerName != s.cfg.Name || p.DeletionTimestamp != nil
	if err != nil {
		s.cfg.Log.Warn("bound pod has a malformed assignment; its GPUs are not counted", "pod", id, "err", err)
	}
	if membership.QueueFromGroup(p) || membership.GangFromJob(p) || membership.GangFromGroup(p) {
		snap.volatile[id] = true
	} else {
		delete(snap.volatile, id)
	}
	snap.pods[id] = p
	if err := snap.books.Book(h); err != nil {
		s.cfg.Log.Warn("booking a pod over what its node reports", "pod", id, "err", err)
	}
}

// releasePod forgets the booked pod id.
func (snap *snapshot) releasePod(id string) {
	delete(snap.pods, id)
	delete(snap.volatile, id)
	snap.books.Release(id)
}

// podNamed is the pod this scheduler knows by id (pending, booked or in
// flight), or nil.
func (s *Scheduler) podNamed(snap *snapshot, id string) *corev1.Pod {
	if p := s.pending[id]; p != nil {
		return p
	}
	if p := s.assumed[id]; p != nil {
		return p
	}
	return snap.pods[id]
}

// podGone forgets pod id: it waits no more and holds nothing.
func (s *Scheduler) podGone(snap *snapshot, id string) {
	var p *corev1.Pod
	if q, ok := s.pending[id]; ok {
		p = q
		s.leavePending(id)
	}
	if q, ok := snap.pods[id]; ok {
		p = q
		snap.releasePod(id)
	}
	delete(s.assumed, id)
	if p != nil {
		s.events.Forget(p.UID)
	}
}

// leavePending takes pod id out of the pending set and the core.
func (s *Scheduler) leavePending(id string) {
	if _, ok := s.pending[id]; ok {
		delete(s.pending, id)
		s.core.Remove(id)
	}
}

// itemOf is a pending pod as the core orders it.
func (s *Scheduler) itemOf(p *corev1.Pod) dispatch.Item {
	return dispatch.Item{ID: p.Namespace + "/" + p.Name, Instance: string(p.UID), Queue: s.members.Queue(p), Priority: priority(p),
		Gang: s.members.Gang(p), Arrived: p.CreationTimestamp.Time}
}

// waiting are the pending pods whose binding is not in flight, oldest
// first.
func (s *Scheduler) waiting() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(s.pending))
	for id, p := range s.pending {
		if _, inFlight := s.assumed[id]; !inFlight {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}
