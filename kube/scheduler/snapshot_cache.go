package scheduler

import (
	"log/slog"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
)

// snapshotCache keeps the scheduling snapshot from one cycle to the next
// and brings it up to date with what changed, so that a cycle's cost
// follows the changes rather than the cluster: the engine's cluster (and
// with it the policy's class index, which follows the cluster's change
// log) survives, and only the pods that came, went or changed are booked
// or released.
//
// The snapshot it returns is always the one buildSnapshot would build
// from the same nodes and pods (TestSnapshotCacheMatchesRebuild; on an
// over-committed node, which pod's booking saturates depends on the
// order of booking, for two rebuilds alike): every delta it cannot apply
// exactly rebuilds the snapshot from scratch instead. That is the case when a node comes, goes or reports other
// GPUs or capacity (an inventory that differs from the one booked on),
// when a change touches a node with a saturated booking (one that no
// longer fitted, whose release would not be exact), and when a release
// fails. Changes to a node object that leave its inventory as it was
// (labels, taints, readiness, status) are taken in place. Only the nodes
// informer events marked (nodeMarks) are looked at, unless the inventory
// source has no versions to tell a changed answer by.
//
// The bookings a cycle adds (the pods it places) come after the ones the
// cache made on each node (record only appends); the next update releases
// them and books the same pods again from their objects, as a rebuild
// would. A cycle that fails part way may leave the cluster with bookings
// it did not record: it must call drop.
//
// Only the scheduling cycle uses it (one goroutine).
type snapshotCache struct {
	// cat reads the MIG devices of allocated claims (bookClaims); nil
	// leaves claims on MIG devices out, logged.
	cat  *catalog.Catalog
	snap *snapshot
	// left are the nodes the snapshot leaves out (their inventory could
	// not be read), by name.
	left map[string]bool
	// pods are the pods given at the last update, by UID.
	pods map[types.UID]*cachedPod
	// kept is, per node, how many of its bookings (a prefix of onNode)
	// the cache made.
	kept []int
	// versions are the versions of the nodes' inventories as read (zero:
	// unknown, read again each update).
	versions []inventoryVersion
	// gen numbers the updates (cachedPod.seen).
	gen uint64
	// claimed are the allocated claims the snapshot booked.
	claimed claimSet
	// rebuilds and updates count the snapshots built from scratch and
	// brought up to date (tests and benchmarks read them).
	rebuilds, updates int
}

// cachedPod is a pod as the snapshot booked it.
type cachedPod struct {
	pod  *corev1.Pod
	key  bookingKey
	ni   int // its node in the snapshot; -1 when not booked (unknown node)
	seen uint64
}

// bookingKey is what a pod's booking is made of (snapshot.book reads no
// more of the pod): a pod whose key is unchanged keeps its booking.
type bookingKey struct {
	node, assignment string
	cpuMilli, memMiB int64
}

func bookingKeyOf(p *corev1.Pod) bookingKey {
	cpu, mem := podHostRequests(p)
	return bookingKey{node: p.Spec.NodeName, assignment: p.Annotations[binding.AnnotationKey], cpuMilli: cpu, memMiB: mem}
}

// update returns the snapshot of nodes with pods booked (as
// buildSnapshot), from the last one and what changed since when it can:
// of the nodes, those changed says may have.
//
// claims are the DRA ResourceClaims (claims.go): a newly allocated claim
// of Tessera's driver is booked in place; one that is gone or books
// something else now rebuilds the snapshot (claims are never released in
// place).
func (c *snapshotCache) update(log *slog.Logger, src InventorySource, nodes []*corev1.Node, changed nodeChanges, pods []*corev1.Pod, claims []*resourceapi.ResourceClaim) *snapshot {
	held, set := allocatedClaims(claims)
	added, same := c.claimed.diff(set)
	if c.snap == nil || !same || !c.takeBackCycle() || !c.syncNodes(src, nodes, changed) || !c.syncPods(log, pods) || !c.addClaims(log, added, set) {
		s := c.rebuild(log, src, nodes, pods)
		s.bookClaims(log, c.cat, held)
		c.claimed = set
		return s
	}
	c.updates++
	return c.snap
}

// addClaims books newly allocated claims on the kept snapshot; false when
// one does not fit exactly (the snapshot is then built anew, so that the
// result does not depend on the order of booking).
func (c *snapshotCache) addClaims(log *slog.Logger, added []*resourceapi.ResourceClaim, set claimSet) bool {
	if len(added) == 0 {
		return true
	}
	from := len(c.snap.claimHolds)
	c.snap.bookClaims(log, c.cat, added)
	for _, h := range c.snap.claimHolds[from:] {
		if !h.exact {
			return false
		}
	}
	for _, cl := range added {
		c.claimed[cl.UID] = set[cl.UID]
	}
	return true
}

// drop forgets the snapshot: the next update builds one from scratch.
func (c *snapshotCache) drop() { c.snap = nil }

// rebuild builds the snapshot from scratch and remembers what it booked.
func (c *snapshotCache) rebuild(log *slog.Logger, src InventorySource, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot {
	c.rebuilds++
	c.gen++
	s := buildSnapshot(log, src, nodes, pods)
	c.snap, c.left, c.pods = s, map[string]bool{}, make(map[types.UID]*cachedPod, len(pods))
	for _, n := range nodes {
		if _, ok := s.byName[n.Name]; !ok {
			c.left[n.Name] = true
		}
	}
	c.kept, c.versions = make([]int, len(s.onNode)), make([]inventoryVersion, len(s.onNode))
	for ni := range s.onNode {
		c.kept[ni] = len(s.onNode[ni])
		c.versions[ni] = inventoryVersionOf(src, s.nodes[ni])
	}
	for _, p := range pods {
		if _, dup := c.pods[p.UID]; dup {
			c.snap = nil // booked twice: a later release could not say which
			return s
		}
		ni, ok := s.byName[p.Spec.NodeName]
		if !ok {
			ni = -1
		}
		c.pods[p.UID] = &cachedPod{pod: p, key: bookingKeyOf(p), ni: ni, seen: c.gen}
	}
	return s
}

// takeBackCycle releases the bookings the last cycle added after the
// cache's own (the pods it placed, booked again from their objects by
// syncPods); false when one cannot be released exactly.
func (c *snapshotCache) takeBackCycle() bool {
	s := c.snap
	for ni := range s.onNode {
		added := s.onNode[ni][c.kept[ni]:]
		for i := len(added) - 1; i >= 0; i-- {
			if !s.release(added[i]) {
				return false
			}
		}
		s.onNode[ni] = s.onNode[ni][:c.kept[ni]]
	}
	return true
}

// syncNodes takes in node objects that changed but report the same
// inventory; false when the nodes, or what one reports, changed.
func (c *snapshotCache) syncNodes(src InventorySource, nodes []*corev1.Node, changed nodeChanges) bool {
	s := c.snap
	if len(nodes) != len(s.nodes)+len(c.left) {
		return false
	}
	if _, ok := src.(versionedSource); !ok || changed.names == nil {
		// Every node: a source without versions may change its answer
		// with no event to mark the node.
		for _, n := range nodes {
			if !c.syncNode(src, n) {
				return false
			}
		}
		return true
	}
	for name := range changed.names {
		n, ok := changed.get(name)
		if !ok {
			if _, known := s.byName[name]; known || c.left[name] {
				return false // gone
			}
			continue // came and went
		}
		if !c.syncNode(src, n) {
			return false
		}
	}
	return true
}

// syncNode takes in one node's object; false when the node is new or
// reports another inventory.
func (c *snapshotCache) syncNode(src InventorySource, n *corev1.Node) bool {
	s := c.snap
	ni, ok := s.byName[n.Name]
	if !ok {
		if !c.left[n.Name] {
			return false // a new node
		}
		_, err := src.Node(n)
		return err != nil // true while still unreadable
	}
	if v := inventoryVersionOf(src, n); v == (inventoryVersion{}) || v != c.versions[ni] {
		// Read again: an inventory equal to the one booked on (a Node
		// object changed in what the source does not read) is kept.
		in, err := src.Node(n)
		if err != nil || !reflect.DeepEqual(in, s.inv[ni]) {
			return false
		}
		c.versions[ni] = v
	}
	if old := s.nodes[ni]; old != n {
		s.nodes[ni] = n
		s.tainted += tainted(n) - tainted(old)
		if why := usable(n); why != s.cluster.Nodes[ni].Closed {
			s.cluster.Nodes[ni].Closed = why
			s.cluster.Changed(ni)
		}
	}
	return true
}

// inventoryVersionOf is the version of src's answer for n; zero when
// unknown.
func inventoryVersionOf(src InventorySource, n *corev1.Node) inventoryVersion {
	if vs, ok := src.(versionedSource); ok {
		if v, ok := vs.version(n); ok {
			return v
		}
	}
	return inventoryVersion{}
}

// syncPods books the pods that are new or changed and releases those
// gone or changed; false when that cannot be done exactly.
func (c *snapshotCache) syncPods(log *slog.Logger, pods []*corev1.Pod) bool {
	c.gen++
	for _, p := range pods {
		e := c.pods[p.UID]
		switch {
		case e == nil:
		case e.seen == c.gen:
			return false // listed twice
		case e.pod == p:
			e.seen = c.gen
			continue
		default:
			if k := bookingKeyOf(p); k == e.key {
				e.pod, e.seen = p, c.gen
				c.repoint(e.ni, p)
				continue
			}
			if !c.release(e) {
				return false
			}
		}
		e, ok := c.book(log, p)
		if !ok {
			return false
		}
		c.pods[p.UID] = e
	}
	for uid, e := range c.pods {
		if e.seen != c.gen {
			if !c.release(e) {
				return false
			}
			delete(c.pods, uid)
		}
	}
	return true
}

// book books a pod as buildSnapshot does; false on a node with a
// saturated booking (the result would depend on the order of booking).
func (c *snapshotCache) book(log *slog.Logger, p *corev1.Pod) (*cachedPod, bool) {
	s := c.snap
	ni, ok := s.byName[p.Spec.NodeName]
	if !ok {
		ni = -1
	} else if c.saturated(ni) {
		return nil, false
	}
	e := &cachedPod{pod: p, key: bookingKeyOf(p), ni: ni, seen: c.gen}
	if ni >= 0 {
		s.book(log, p)
		c.kept[ni] = len(s.onNode[ni])
	}
	return e, true
}

// release takes a pod's booking off its node; false when that cannot be
// done exactly.
func (c *snapshotCache) release(e *cachedPod) bool {
	if e.ni < 0 {
		return true
	}
	s := c.snap
	bs := s.onNode[e.ni][:c.kept[e.ni]]
	at := c.find(e.ni, e.pod.UID)
	if at < 0 || c.saturated(e.ni) || !s.release(bs[at]) {
		return false
	}
	s.onNode[e.ni] = append(bs[:at], bs[at+1:]...)
	c.kept[e.ni]--
	return true
}

// repoint makes a booking name the pod's latest object (the cycle reads
// its status, deletion and labels).
func (c *snapshotCache) repoint(ni int, p *corev1.Pod) {
	if ni < 0 {
		return
	}
	if at := c.find(ni, p.UID); at >= 0 {
		c.snap.onNode[ni][at].pod = p
	}
}

// find is the position of a pod's booking among the cache's on node ni,
// -1 when absent.
func (c *snapshotCache) find(ni int, uid types.UID) int {
	for i, b := range c.snap.onNode[ni][:c.kept[ni]] {
		if b.pod.UID == uid {
			return i
		}
	}
	return -1
}

// saturated reports whether a booking on node ni had to saturate.
func (c *snapshotCache) saturated(ni int) bool {
	for _, b := range c.snap.onNode[ni][:c.kept[ni]] {
		if !b.exact {
			return true
		}
	}
	return false
}

// release gives a booking's resources back to its node, last part first;
// false when the booking was not exact or the engine refuses.
func (s *snapshot) release(b booking) bool {
	if !b.exact {
		return false
	}
	for i := len(b.parts) - 1; i >= 0; i-- {
		if err := s.cluster.Release(&b.parts[i].pod, b.parts[i].dec); err != nil {
			return false
		}
	}
	return true
}
