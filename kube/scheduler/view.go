package scheduler

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// This file publishes what the last scheduling cycle decided from, for
// readers outside the cycle (the cluster view of the web UI, package
// kube/clusterview, which owns the published types: clusterview.View and
// the types it holds). At the end of each cycle the cycle's own snapshot,
// queue tree and pending queue are published as they are, behind an atomic
// pointer, so publishing copies nothing. The snapshot lives on into the
// next cycle (snapshot.go), which changes it under the scheduler's
// snapMu: View translates the view into plain values under that lock, so
// a reader may wait for a cycle in progress to end, and then reads the
// snapshot as the last cycle left it. Nothing here decides.

// cycleView is one cycle's state as published; its snapshot changes only
// in the next cycle, under snapMu.
type cycleView struct {
	at      time.Time
	snap    *snapshot
	tree    *queueing.Tree
	pending []*corev1.Pod // in queue order, as the cycle started
	waiting map[string]int
	// typical is the policy's typical-pod distribution as the cycle ended
	// (placement.TypicalOf), for the fragmentation the view reports.
	typical placement.Distribution
	// backingOff are the pending pods waiting out a backoff as it ended.
	backingOff map[types.UID]bool
	// What the view's pods are read with: the scheduler's name and
	// policy, its catalog and its reader of gangs and queues.
	name, policy string
	cat          *catalog.Catalog
	members      *membership.Reader
}

// viewBoard holds the last cycle's view; its zero value is ready.
type viewBoard struct {
	cur atomic.Pointer[cycleView]
	// watched is set once someone asked for changes: only then does a
	// publication compute the fingerprint that tells a change.
	watched atomic.Bool

	mu      sync.Mutex
	changed chan struct{}
	print   uint64
}

// publishView publishes what this cycle decided from.
func (s *Scheduler) publishView(at time.Time, snap *snapshot, tree *queueing.Tree, pending []*corev1.Pod, waiting map[string]int) {
	pending = s.inOrder(pending)
	v := &cycleView{at: at, snap: snap, tree: tree, pending: pending, waiting: waiting, typical: placement.TypicalOf(s.policy), backingOff: map[types.UID]bool{},
		name: s.cfg.Name, policy: s.cfg.Policy, cat: s.cfg.Catalog, members: &s.members}
	for _, p := range pending {
		if s.core.BackingOff(p.Namespace+"/"+p.Name, at) {
			v.backingOff[p.UID] = true
		}
	}
	b := &s.views
	old := b.cur.Swap(v)
	if !b.watched.Load() {
		return
	}
	p := v.fingerprint()
	b.mu.Lock()
	defer b.mu.Unlock()
	if old != nil && p == b.print {
		return
	}
	b.print = p
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// fingerprint hashes the objects a view is made of (nodes, booked and
// pending pods, by UID and resourceVersion): it changes when they do, and
// not with the order a cycle happens to list them in (the sum of each
// object's hash). Changes to GPUNode and Queue objects alone show at the
// reader's next periodic read.
func (v *cycleView) fingerprint() uint64 {
	var sum uint64
	h := fnv.New64a()
	put := func(parts ...string) {
		h.Reset()
		for _, p := range parts {
			_, _ = h.Write([]byte(p))
			_, _ = h.Write([]byte{0})
		}
		sum += h.Sum64()
	}
	for _, n := range v.snap.nodes {
		put("n", n.Name, n.ResourceVersion)
	}
	for i, n := range v.snap.nodes {
		for _, id := range v.snap.books.OnNode(i) {
			p, ok := v.snap.pods[id]
			if !ok {
				continue // assumed by the cycle, not committed
			}
			put("b", n.Name, string(p.UID), p.ResourceVersion)
		}
	}
	for _, p := range v.pending {
		put("p", string(p.UID), p.ResourceVersion)
	}
	return sum
}

// ViewChanged returns a channel closed when a cycle publishes a view that
// differs from the last (its nodes or pods changed).
func (s *Scheduler) ViewChanged() <-chan struct{} {
	b := &s.views
	b.watched.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// View returns what the last cycle decided from; ok is false before the
// first cycle (and on a replica that is not the leader).
func (s *Scheduler) View() (clusterview.View, bool) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	v := s.views.cur.Load()
	if v == nil {
		return clusterview.View{}, false
	}
	return v.view(), true
}

// view translates v into plain values (under snapMu).
func (v *cycleView) view() clusterview.View {
	out := clusterview.View{Time: v.at, Scheduler: v.name, Policy: v.policy, Typical: len(v.typical)}
	snap := v.snap
	if len(v.typical) > 0 {
		out.FragmentationMilli = placement.ClusterFragmentation(snap.cluster, v.typical)
	}
	running := map[string]int{}
	booked := map[types.UID]bool{}
	for i, n := range snap.nodes {
		cn := &snap.cluster.Nodes[i]
		nv := clusterview.NodeView{
			Name: n.Name, Source: snap.inv(i).Source, Ready: nodeReady(n), Unschedulable: n.Spec.Unschedulable,
			CPUMilli: cn.CPUMilli, FreeCPUMilli: cn.FreeCPUMilli, MemoryMiB: cn.MemoryMiB, FreeMemoryMiB: cn.FreeMemoryMiB,
		}
		for _, g := range snap.inv(i).GPUs {
			gv := clusterview.GPUView{GPU: g}
			for _, pg := range cn.GPUs {
				if pg.Index == g.Index {
					gv.Schedulable, gv.FreeMilli, gv.FreeMemoryMiB = true, pg.FreeMilli, pg.FreeMemoryMiB
					break
				}
			}
			nv.GPUs = append(nv.GPUs, gv)
		}
		for _, id := range snap.books.OnNode(i) {
			p, ok := snap.pods[id]
			if !ok {
				continue
			}
			pv := v.podView(p, false)
			pv.Node = n.Name
			booked[p.UID] = true
			running[pv.Queue]++
			nv.Pods = append(nv.Pods, pv)
		}
		out.Nodes = append(out.Nodes, nv)
	}
	for _, p := range v.pending {
		if booked[p.UID] {
			continue // placed by this cycle: it is on its node now
		}
		pv := v.podView(p, true)
		pv.BackingOff = v.backingOff[p.UID]
		out.Pending = append(out.Pending, pv)
	}
	// The ledger the cycle ordered queues by (and the metrics report).
	ledger := snap.ledger(v.tree)
	for _, name := range v.tree.Names() {
		q, _ := v.tree.Queue(name)
		out.Queues = append(out.Queues, clusterview.QueueView{
			Queue: q, Configured: q != queueing.Queue{Name: queueing.DefaultQueue, Weight: 1}, Used: ledger.Used(name), Share: ledger.Share(name),
			Running: running[name], Waiting: v.waiting[name],
		})
	}
	return out
}

// podView reads one pod; pending pods carry their PodScheduled reason.
func (v *cycleView) podView(p *corev1.Pod, pending bool) clusterview.PodView {
	pv := clusterview.PodView{
		Namespace: p.Namespace, Name: p.Name, UID: p.UID, Queue: v.members.Queue(p), Priority: priority(p), Gang: v.members.Gang(p),
		Phase: p.Status.Phase, Created: p.CreationTimestamp.Time, Deleting: p.DeletionTimestamp != nil,
	}
	if p.Status.StartTime != nil {
		pv.Started = p.Status.StartTime.Time
	}
	pv.CPUMilli, pv.MemoryMiB = podHostRequests(p)
	reqs, err := workload.FromPod(p, v.cat)
	if err != nil {
		pv.RequestError = err.Error()
	}
	for _, r := range reqs {
		pv.Requests = append(pv.Requests, r.GPU)
	}
	if a, err := boundpods.Assignment(p); err == nil && a != nil {
		pv.Assignment = a
	}
	if pending {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				pv.Reason, pv.Message = c.Reason, c.Message
			}
		}
	}
	return pv
}

// nodeReady reports the node's Ready condition.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
