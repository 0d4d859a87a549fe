package scheduler

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/boundpods"
)

// The pods a cycle looks at are those the informer's events marked since
// the last cycle (every pod when the snapshot is new): a pod that waits
// for this scheduler joins the pending set and the core; one bound (or
// assumed) is booked; one gone, finished or no longer ours leaves both.
// A cycle's cost follows what changed, not how many pods run.

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
// take them from another object (a Volcano PodGroup, a Job), which may
// change without the pod.
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
		delete(s.arrived, p.UID)
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
