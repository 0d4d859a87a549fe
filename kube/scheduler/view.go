package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// publishView publishes what this cycle decided from (its books, pods and
// queues as they are, nothing copied) for the cluster view of the web UI
// (package kube/clusterview, which translates it when a reader asks). The
// books change only in the next cycle, under snapMu, which View holds.
func (s *Scheduler) publishView(at time.Time, snap *snapshot, tree *queueing.Tree, pending []*corev1.Pod, waiting map[string]int) {
	c := &clusterview.Cycle{At: at, Scheduler: s.cfg.Name, Policy: s.cfg.Policy, Books: snap.books, Nodes: func() []*corev1.Node { return snap.nodes }, Pods: snap.pods,
		Pending: pending, Order: s.lastOrder, Waiting: waiting, BackingOff: map[types.UID]bool{}, Tree: tree, Typical: placement.TypicalOf(s.policy),
		Catalog: s.cfg.Catalog, Members: &s.members}
	for _, p := range pending {
		if s.core.BackingOff(p.Namespace+"/"+p.Name, at) {
			c.BackingOff[p.UID] = true
		}
	}
	s.views.Publish(c)
}

// ViewChanged returns a channel closed when a cycle publishes a view that
// differs from the last (its nodes or pods changed).
func (s *Scheduler) ViewChanged() <-chan struct{} { return s.views.Changed() }

// View returns what the last cycle decided from, with the nodes' GPU use
// as their agents last published it; ok is false before the first cycle
// (and on a replica that is not the leader).
func (s *Scheduler) View() (clusterview.View, bool) {
	s.snapMu.Lock()
	v, ok := s.views.View()
	uses := s.useObjects
	s.snapMu.Unlock()
	if ok {
		// Out of snapMu: the first read starts and syncs the informer.
		v.ReadUse(uses())
	}
	return v, ok
}
