package scheduler

import (
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// snapshot is the cluster as this scheduler books it (package booked:
// nodes by name, what each pod and claim holds), kept from one cycle to
// the next and brought up to date with what changed (sync), so that a
// cycle's cost follows the changes; and what maps its node positions back
// to Kubernetes nodes. Only the scheduling loop changes it (View reads it
// under snapMu).
type snapshot struct {
	books   *booked.Cluster
	cluster *placement.Cluster // books.Cluster()
	// nodes are the laid-out nodes' objects by position, and layout the
	// books' layout they follow.
	nodes  []*corev1.Node
	layout uint64
	// objs are every node object known, by name (laid out or left out:
	// their inventory could not be read), and versions the versions of
	// the inventories read (zero: unknown, read again each time).
	objs     map[string]*corev1.Node
	versions map[string]nodeinventory.Version
	// sharing is per node how its agent shares its GPUs, and sharings its
	// distinct values: a pod every one of them admits needs no per-node
	// sharing check. Why no pod may go to a node at all (not Ready,
	// unschedulable) is the engine node's Closed, so that the policies'
	// class index leaves such nodes out without a per-pod view.
	sharing  []placement.NodeSharing
	sharings []placement.NodeSharing
	// tainted counts the nodes with a NoSchedule or NoExecute taint: while
	// none has, only a pod with node affinity needs a per-node check.
	tainted int
	// pods are the pods booked (bound, or assumed by this scheduler) by
	// workload ID, and volatile those whose queue or gang is read from
	// another object (a Volcano PodGroup, a Job, a Workload API
	// PodGroup), read again each cycle.
	pods     map[string]*corev1.Pod
	volatile map[string]bool
	// claims are the allocated claims of Tessera's driver, booked.
	claims *draclaims.Booking
	// capacity is what the nodes hold in all, for queue shares.
	capacity queueing.Resources
}

// newSnapshot is a snapshot on b (the core's books, empty).
func newSnapshot(b *booked.Cluster, cat *catalog.Catalog, log *slog.Logger) *snapshot {
	return &snapshot{books: b, cluster: b.Cluster(), objs: map[string]*corev1.Node{}, versions: map[string]nodeinventory.Version{},
		pods: map[string]*corev1.Pod{}, volatile: map[string]bool{}, claims: draclaims.NewBooking(b, cat, log)}
}

// inv is node i's inventory.
func (snap *snapshot) inv(i int) *inventory.Node { return snap.books.Inventory(i) }

// setNode takes in the node named name as it is now (nil: gone). Its
// inventory is read again only when the source says it changed; one that
// cannot be read leaves the node out, logged.
func (snap *snapshot) setNode(log *slog.Logger, src nodeinventory.Source, name string, n *corev1.Node) {
	if n == nil {
		snap.books.RemoveNode(name)
		delete(snap.objs, name)
		delete(snap.versions, name)
		return
	}
	old, known := snap.objs[name]
	snap.objs[name] = n
	v, ok := snap.versions[name]
	read := !known || !ok || v == (nodeinventory.Version{}) || v != nodeinventory.VersionOf(src, n)
	if read {
		in, err := src.Node(n)
		if err == nil {
			in.Name = n.Name
			err = snap.books.SetNode(in, usable(n))
		}
		if err != nil {
			if ok || !known { // say it once, not every cycle
				log.Warn("node left out of scheduling", "node", n.Name, "err", err)
			}
			snap.books.RemoveNode(name)
			delete(snap.versions, name)
			return
		}
		snap.versions[name] = nodeinventory.VersionOf(src, n)
	}
	snap.books.SetClosed(name, usable(n))
	if snap.books.Stale() {
		return // the node set changed: settle lays out every node
	}
	ni, laid := snap.books.Index(name)
	if !laid || snap.layout != snap.books.Layout() {
		return
	}
	if old != n {
		snap.tainted += tainted(n) - tainted(snap.nodes[ni])
		snap.nodes[ni] = n
	}
	if read {
		snap.sharing[ni] = placement.SharingOf(snap.inv(ni))
		snap.sharings = nil // worked out again in settle
	}
}

// settle brings the per-position views up to date after nodes changed.
func (snap *snapshot) settle() {
	b := snap.books
	snap.cluster, snap.capacity = b.Cluster(), b.Capacity()
	if snap.layout != b.Layout() {
		snap.layout = b.Layout()
		snap.nodes, snap.sharing, snap.tainted = make([]*corev1.Node, b.Len()), make([]placement.NodeSharing, b.Len()), 0
		for i := range snap.nodes {
			snap.nodes[i] = snap.objs[b.Name(i)]
			snap.sharing[i] = placement.SharingOf(snap.inv(i))
			snap.tainted += tainted(snap.nodes[i])
		}
		snap.sharings = nil
	}
	if snap.sharings == nil {
		for _, sh := range snap.sharing {
			if !slices.Contains(snap.sharings, sh) {
				snap.sharings = append(snap.sharings, sh)
			}
		}
	}
}

// syncNodes takes in the nodes that changed: those marked, or every node
// with all, or when the inventory source has no versions (its answer may
// change with no event to mark the node).
//
// get returns a marked node's object (false: it is gone).
func (s *Scheduler) syncNodes(snap *snapshot, all bool, marked map[string]bool, get func(string) (*corev1.Node, bool)) error {
	if _, versioned := s.cfg.Inventory.(nodeinventory.Versioned); all || !versioned {
		nodes, err := s.nodes.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		s.takeNodes(snap, nodes)
		return nil
	}
	for name := range marked {
		n, ok := get(name)
		if !ok {
			n = nil // gone
		}
		snap.setNode(s.cfg.Log, s.cfg.Inventory, name, n)
	}
	snap.settle()
	return nil
}

// takeNodes takes in every node listed (and forgets those not listed).
func (s *Scheduler) takeNodes(snap *snapshot, nodes []*corev1.Node) {
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		listed[n.Name] = true
		snap.setNode(s.cfg.Log, s.cfg.Inventory, n.Name, n)
	}
	for name := range snap.objs {
		if !listed[name] {
			snap.setNode(s.cfg.Log, s.cfg.Inventory, name, nil)
		}
	}
	snap.settle()
}

// ledger charges every booked pod and claim to its queue, over the
// nodes' total.
func (snap *snapshot) ledger(tree *queueing.Tree) *queueing.Ledger {
	return tree.NewLedger(snap.capacity, snap.books.Usage())
}
