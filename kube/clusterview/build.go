package clusterview

import (
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// Cycle is what one scheduling cycle decided from, as the scheduler
// publishes it at the cycle's end: its books and objects as they are, not
// copied. The books change only in the scheduler's next cycle, so a View
// is read under the scheduler's own lock (Board.View's caller holds it).
type Cycle struct {
	At                time.Time
	Scheduler, Policy string
	// Books are the core's books; Nodes the laid-out nodes' objects by
	// position as the books lay them out when asked (a failed cycle may
	// lay them out again without publishing), Pods the booked pods'
	// objects by workload ID (a booked ID with no object is assumed by
	// the cycle, not committed).
	Books *booked.Cluster
	Nodes func() []*corev1.Node
	Pods  map[string]*corev1.Pod
	// Pending are the pods waiting, Order their IDs (namespace/name) in
	// the order the cycle took them (gangs at their first member's
	// place); Waiting counts them by queue; BackingOff those waiting out a
	// backoff as it ended.
	Pending    []*corev1.Pod
	Order      []string
	Waiting    map[string]int
	BackingOff map[types.UID]bool
	Tree       *queueing.Tree
	// Typical is the policy's typical-pod distribution as the cycle ended
	// (placement.TypicalOf), for the fragmentation the view reports.
	Typical placement.Distribution
	// Catalog and Members read the pods' requests, gangs and queues.
	Catalog *catalog.Catalog
	Members *membership.Reader
}

// Board holds the last published cycle; its zero value is ready.
// Publishing copies nothing: a reader translates the cycle when it asks.
type Board struct {
	cur atomic.Pointer[Cycle]
	// watched is set once someone asked for changes: only then does a
	// publication compute the fingerprint that tells a change.
	watched atomic.Bool

	mu      sync.Mutex
	changed chan struct{}
	print   uint64
}

// Publish makes c the last cycle, and closes the Changed channel when its
// objects differ from the last one's.
func (b *Board) Publish(c *Cycle) {
	old := b.cur.Swap(c)
	if !b.watched.Load() {
		return
	}
	p := c.fingerprint()
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

// Changed returns a channel closed when a cycle publishes a view that
// differs from the last (its nodes or pods changed).
func (b *Board) Changed() <-chan struct{} {
	b.watched.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// View translates the last cycle into plain values; ok is false before
// the first. The caller holds the lock its scheduler changes the books
// under.
func (b *Board) View() (View, bool) {
	c := b.cur.Load()
	if c == nil {
		return View{}, false
	}
	return c.view(), true
}

// fingerprint hashes the objects a view is made of (nodes, booked and
// pending pods, by UID and resourceVersion): it changes when they do, and
// not with the order a cycle happens to list them in (the sum of each
// object's hash). Changes to GPUNode and Queue objects alone show at the
// reader's next periodic read.
func (c *Cycle) fingerprint() uint64 {
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
	nodes := c.Nodes()
	for _, n := range nodes {
		put("n", n.Name, n.ResourceVersion)
	}
	for i, n := range nodes {
		for _, id := range c.Books.OnNode(i) {
			if p, ok := c.Pods[id]; ok {
				put("b", n.Name, string(p.UID), p.ResourceVersion)
			}
		}
	}
	for _, p := range c.Pending {
		put("p", string(p.UID), p.ResourceVersion)
	}
	return sum
}

func (c *Cycle) view() View {
	out := View{Time: c.At, Scheduler: c.Scheduler, Policy: c.Policy, Typical: len(c.Typical)}
	cluster := c.Books.Cluster()
	if len(c.Typical) > 0 {
		out.FragmentationMilli = placement.ClusterFragmentation(cluster, c.Typical)
	}
	running := map[string]int{}
	booked := map[types.UID]bool{}
	for i, n := range c.Nodes() {
		cn, inv := &cluster.Nodes[i], c.Books.Inventory(i)
		nv := NodeView{
			Name: n.Name, Source: inv.Source, Ready: nodeReady(n), Unschedulable: n.Spec.Unschedulable,
			CPUMilli: cn.CPUMilli, FreeCPUMilli: cn.FreeCPUMilli, MemoryMiB: cn.MemoryMiB, FreeMemoryMiB: cn.FreeMemoryMiB,
		}
		for _, g := range inv.GPUs {
			gv := GPUView{GPU: g}
			for _, pg := range cn.GPUs {
				if pg.Index == g.Index {
					gv.Schedulable, gv.FreeMilli, gv.FreeMemoryMiB = true, pg.FreeMilli, pg.FreeMemoryMiB
					break
				}
			}
			nv.GPUs = append(nv.GPUs, gv)
		}
		for _, id := range c.Books.OnNode(i) {
			p, ok := c.Pods[id]
			if !ok {
				continue
			}
			pv := c.podView(p, false)
			pv.Node = n.Name
			booked[p.UID] = true
			running[pv.Queue]++
			nv.Pods = append(nv.Pods, pv)
		}
		out.Nodes = append(out.Nodes, nv)
	}
	rank := make(map[string]int, len(c.Order))
	for i, id := range c.Order {
		rank[id] = i
	}
	pending := slices.Clone(c.Pending)
	slices.SortStableFunc(pending, func(a, b *corev1.Pod) int {
		return rank[a.Namespace+"/"+a.Name] - rank[b.Namespace+"/"+b.Name]
	})
	for _, p := range pending {
		if booked[p.UID] {
			continue // placed by this cycle: it is on its node now
		}
		pv := c.podView(p, true)
		pv.BackingOff = c.BackingOff[p.UID]
		out.Pending = append(out.Pending, pv)
	}
	// The ledger the cycle ordered queues by (and the metrics report).
	ledger := c.Tree.NewLedger(c.Books.Capacity(), c.Books.Usage())
	for _, name := range c.Tree.Names() {
		q, _ := c.Tree.Queue(name)
		out.Queues = append(out.Queues, QueueView{
			Queue: q, Configured: q != queueing.Queue{Name: queueing.DefaultQueue, Weight: 1}, Used: ledger.Used(name), Share: ledger.Share(name),
			Running: running[name], Waiting: c.Waiting[name],
		})
	}
	return out
}

// podView reads one pod; pending pods carry their PodScheduled reason.
func (c *Cycle) podView(p *corev1.Pod, pending bool) PodView {
	pv := PodView{
		Namespace: p.Namespace, Name: p.Name, UID: p.UID, Queue: c.Members.Queue(p), Gang: c.Members.Gang(p),
		Phase: p.Status.Phase, Created: p.CreationTimestamp.Time, Deleting: p.DeletionTimestamp != nil,
	}
	if p.Spec.Priority != nil {
		pv.Priority = *p.Spec.Priority
	}
	if p.Status.StartTime != nil {
		pv.Started = p.Status.StartTime.Time
	}
	pv.CPUMilli, pv.MemoryMiB = boundpods.HostRequests(p)
	reqs, err := workload.FromPod(p, c.Catalog)
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
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				pv.Reason, pv.Message = cond.Reason, cond.Message
			}
		}
	}
	return pv
}

// nodeReady reports the node's Ready condition.
func nodeReady(n *corev1.Node) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}
