package booked

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// Hold is what a workload holds on a node, as its front door reads it.
type Hold struct {
	// ID is the workload's ID (one hold per ID).
	ID string
	// Node names the node; a hold on a node the cluster does not have is
	// kept, and booked when the node comes.
	Node string
	// Key identifies what is held: booking a hold again with the same key
	// on the same node only takes in its other fields. "" always books
	// again.
	Key string
	// CPUMilli and MemoryMiB are its host requests.
	CPUMilli, MemoryMiB int64
	// Slot: it takes one of its node's pod slots (a pod; a shared claim's
	// hold takes none), with the host requests.
	Slot bool
	// Groups are its GPU shares, one engine part per group: a container's
	// shares (identical per GPU), or one device of a claim. The host
	// requests go with the first part.
	Groups [][]binding.Share
	// For, when not nil (even empty), makes it a hold of no workload of its own (a shared device
	// claim): the workloads it serves, in order. It is charged to the
	// first of them booked, and runs with a workload it alone serves (its
	// stopping frees it).
	For []string

	// How the workload runs, for preemption and queue usage. Started and
	// Order are when it started (cycle.Running); the core's record of a
	// workload it bound (Assume: Order > 0) outlives the front door's, so
	// that the victims' order is the core's alone.
	Queue    string
	Priority int32
	Gang     string
	Started  time.Time
	Order    uint64
	// Stopping: it is being stopped, or is not the scheduler's to stop;
	// it counts, but is never a victim.
	Stopping bool
}

// Cluster is the cluster as booked. Not safe for concurrent use.
type Cluster struct {
	nodes   []node
	byName  map[string]int
	cluster *placement.Cluster
	holds   map[string]*held
	seq     uint64
	// stale: the node set changed; the next read lays out the nodes.
	stale bool
	// layout counts the layouts (node positions change only then).
	layout   uint64
	capacity queueing.Resources
	// own is what the booked workloads take from their queues, kept as
	// they are booked and released; shared are the booked holds of no
	// workload of their own (charged in Usage).
	own    map[string]queueing.Resources
	shared map[*held]bool
	// gangs are the booked workloads of each gang (its running members).
	gangs map[string]map[*held]bool
	// running are the booked workloads as Running reports them, kept up
	// to date with the holds touched since (runHeld: whose entry each is;
	// runStale: built anew at the next read).
	running  []cycle.Running
	runHeld  []*held
	touched  map[*held]bool
	runStale bool
	// usage is Usage as last worked out, nil when a change made it stale.
	usage map[string]queueing.Resources
}

type node struct {
	name    string
	inv     inventory.Node
	closed  string
	uuidPos map[string]int // GPU UUID -> position in the engine node
	holds   []*held        // in booking order
	inexact int            // holds booked saturating
}

type held struct {
	Hold
	seq     uint64
	ni      int // position; -1 while the node is unknown or the layout stale
	parts   []placement.Pod
	decs    []placement.Decision
	exact   bool
	assumed bool // booked by a cycle (Assume), as decided
	use     queueing.Resources
	ri      int // its entry in running, -1 when it has none
}

// New returns an empty cluster.
func New() *Cluster {
	return &Cluster{byName: map[string]int{}, cluster: &placement.Cluster{}, holds: map[string]*held{},
		own: map[string]queueing.Resources{}, shared: map[*held]bool{}, touched: map[*held]bool{}, gangs: map[string]map[*held]bool{}}
}

// SetNode sets a node's inventory and why it takes no new work ("": it
// does). An inventory the engine cannot read is an error and changes
// nothing.
func (c *Cluster) SetNode(inv inventory.Node, closed string) error {
	if _, err := placement.FromInventory([]inventory.Node{inv}); err != nil {
		return fmt.Errorf("node %s: %w", inv.Name, err)
	}
	ni, ok := c.byName[inv.Name]
	if !ok {
		c.byName[inv.Name] = len(c.nodes)
		c.nodes = append(c.nodes, node{name: inv.Name, inv: inv, closed: closed})
		c.stale = true
		c.changed()
		return nil
	}
	n := &c.nodes[ni]
	if reflect.DeepEqual(n.inv, inv) {
		c.SetClosed(inv.Name, closed)
		return nil
	}
	n.inv, n.closed = inv, closed
	if !c.stale {
		c.rebook(ni)
		c.capacity = cycle.Capacity(c.cluster)
	}
	c.changed()
	return nil
}

// SetClosed sets why a known node takes no new work ("": it does).
func (c *Cluster) SetClosed(name, closed string) {
	ni, ok := c.byName[name]
	if !ok || c.nodes[ni].closed == closed {
		return
	}
	c.nodes[ni].closed = closed
	if !c.stale {
		c.cluster.Nodes[ni].Closed = closed
		c.cluster.Changed(ni)
	}
}

// RemoveNode forgets a node; the holds on it are kept (unbooked) until
// released or the node comes back.
func (c *Cluster) RemoveNode(name string) {
	ni, ok := c.byName[name]
	if !ok {
		return
	}
	c.nodes = slices.Delete(c.nodes, ni, ni+1)
	delete(c.byName, name)
	for i := ni; i < len(c.nodes); i++ {
		c.byName[c.nodes[i].name] = i
	}
	c.stale = true
	c.changed()
}

// Book books h, replacing the workload's hold (or what a cycle assumed
// for it). The error says why the booking is not exact (it no longer
// fits, or names GPUs the node does not report); it is booked all the
// same.
func (c *Cluster) Book(h Hold) error {
	c.settle()
	seq := c.seq
	if old := c.holds[h.ID]; old != nil {
		if old.Order > 0 {
			h.Started, h.Order = old.Started, old.Order
		}
		if !old.assumed && old.Key == h.Key && h.Key != "" && old.Node == h.Node {
			if !sameRun(old.Hold, h) {
				c.recharge(old, func() { old.Hold = h })
			}
			return nil
		}
		seq = old.seq
		c.unbook(old)
	} else {
		c.seq++
	}
	nh := &held{Hold: h, seq: seq, ni: -1, exact: true, ri: -1}
	nh.use = useOf(h)
	c.holds[h.ID] = nh
	c.changed()
	ni, ok := c.byName[h.Node]
	if !ok {
		return nil
	}
	return c.place(ni, nh)
}

// Assume records what a cycle placed for workload id (already booked on
// Cluster() by the cycle): its parts, as decided, on decisions[0]'s node.
// The front door's Book replaces it.
func (c *Cluster) Assume(id string, r cycle.Running) {
	if old := c.holds[id]; old != nil {
		c.unbook(old)
		delete(c.holds, id)
	}
	if len(r.Decisions) == 0 || c.stale {
		return
	}
	ni := r.Decisions[0].Node
	h := &held{Hold: Hold{ID: id, Node: c.nodes[ni].name, Queue: r.Queue, Priority: r.Priority, Gang: r.Gang, Started: r.Started, Order: r.Order},
		seq: c.seq, ni: ni, parts: r.Parts, decs: r.Decisions, exact: true, assumed: true, ri: -1}
	c.seq++
	for i, p := range r.Parts {
		if len(r.Decisions[i].MIG) == 0 {
			// As its shares will say once its front door books it.
			h.use = h.use.Add(cycle.Granted(c.cluster, p, r.Decisions[i]))
			continue
		}
		h.use.CPUMilli += p.CPUMilli
		h.use.MemoryMiB += p.MemoryMiB
	}
	c.holds[id] = h
	n := &c.nodes[ni]
	n.holds = append(n.holds, h)
	c.charge(h, 1)
	c.touch(h)
	c.changed()
}

// Release forgets workload id's hold and gives back what it took.
func (c *Cluster) Release(id string) {
	h := c.holds[id]
	if h == nil {
		return
	}
	c.unbook(h)
	delete(c.holds, id)
	c.changed()
}

// Relabel changes how a booked workload runs (its queue or gang read
// anew), keeping what it holds.
func (c *Cluster) Relabel(id, queue, gang string) {
	if h := c.holds[id]; h != nil && (h.Queue != queue || h.Gang != gang) {
		c.recharge(h, func() { h.Queue, h.Gang = queue, gang })
	}
}

// Has reports whether workload id has a hold, and whether it is what a
// cycle assumed (not yet booked by its front door).
func (c *Cluster) Has(id string) (held, assumed bool) {
	h := c.holds[id]
	return h != nil, h != nil && h.assumed
}

// Booked reports whether workload id is booked on a node the cluster has
// (one of Running's workloads).
func (c *Cluster) Booked(id string) bool {
	c.settle()
	h := c.holds[id]
	return h != nil && h.ni >= 0 && h.For == nil
}

func (c *Cluster) changed() { c.usage = nil }

// touch notes that h's entry in Running may have changed.
func (c *Cluster) touch(h *held) { c.touched[h] = true }

// recharge changes how a hold runs (edit), charging its queue anew.
func (c *Cluster) recharge(h *held, edit func()) {
	if h.ni >= 0 {
		c.charge(h, -1)
	}
	edit()
	if h.ni >= 0 {
		c.charge(h, 1)
	}
	c.touch(h)
	c.changed()
}

// sameRun reports whether two holds of one key run alike (what Running
// and Usage read besides what is held).
func sameRun(a, b Hold) bool {
	return a.Queue == b.Queue && a.Priority == b.Priority && a.Gang == b.Gang && a.Started.Equal(b.Started) && a.Order == b.Order &&
		a.Stopping == b.Stopping && slices.Equal(a.For, b.For) && (a.For == nil) == (b.For == nil)
}

// settle lays out the nodes when the node set changed.
func (c *Cluster) settle() {
	if c.stale {
		c.lay()
	}
}

// Cluster is the engine's cluster with every hold booked: node i is
// Name(i). The pointer stays the same for the life of c; a cycle books on
// it (Assume records what it placed).
func (c *Cluster) Cluster() *placement.Cluster { c.settle(); return c.cluster }

// Stale reports whether the node set changed since the nodes were last
// laid out (the next read lays them out: a front door that sets many
// nodes reads after the last).
func (c *Cluster) Stale() bool { return c.stale }

// Layout counts the layouts: node positions stay as they are until it
// changes.
func (c *Cluster) Layout() uint64 { c.settle(); return c.layout }

// Len is the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Index is the position of the node named name.
func (c *Cluster) Index(name string) (int, bool) {
	c.settle()
	ni, ok := c.byName[name]
	return ni, ok
}

// Name is node i's name.
func (c *Cluster) Name(i int) string { c.settle(); return c.nodes[i].name }

// Inventory is node i's inventory, as set (read only).
func (c *Cluster) Inventory(i int) *inventory.Node { c.settle(); return &c.nodes[i].inv }

// Capacity is what the nodes hold in all (cycle.Capacity).
func (c *Cluster) Capacity() queueing.Resources { c.settle(); return c.capacity }

// OnNode are the workloads holding node i (not the holds of no workload
// of their own), in booking order.
func (c *Cluster) OnNode(i int) []string {
	c.settle()
	var out []string
	for _, h := range c.nodes[i].holds {
		if h.For == nil {
			out = append(out, h.ID)
		}
	}
	return out
}

// lay lays out every node in name order and books every hold again, in
// booking order.
func (c *Cluster) lay() {
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].name < c.nodes[j].name })
	for i := range c.nodes {
		c.byName[c.nodes[i].name] = i
		c.nodes[i].holds, c.nodes[i].inexact = nil, 0
	}
	c.cluster.Nodes = make([]placement.Node, len(c.nodes))
	for i := range c.nodes {
		c.cluster.Nodes[i] = engineNode(&c.nodes[i].inv)
	}
	for i := range c.nodes {
		c.cluster.Nodes[i].Closed = c.nodes[i].closed
		c.nodes[i].uuidPos = uuidPositions(&c.cluster.Nodes[i], &c.nodes[i].inv)
	}
	hs := make([]*held, 0, len(c.holds))
	for _, h := range c.holds {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].seq < hs[j].seq })
	c.stale = false
	c.own, c.shared, c.gangs = map[string]queueing.Resources{}, map[*held]bool{}, map[string]map[*held]bool{}
	c.runStale = true
	for _, h := range hs {
		h.ni = -1
		if h.assumed {
			// A cycle's placement names positions of a layout gone: its
			// front door books it again, or it is forgotten.
			delete(c.holds, h.ID)
			continue
		}
		if ni, ok := c.byName[h.Node]; ok {
			_ = c.place(ni, h) // not exact: said when it was booked
		}
	}
	c.capacity = cycle.Capacity(c.cluster)
	c.layout++
	c.changed()
}
