package scheduler

import (
	"log/slog"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// snapshot is one cycle's view: the engine's cluster plus what maps engine
// positions back to Kubernetes nodes and GPU UUIDs.
type snapshot struct {
	cluster *placement.Cluster
	nodes   []*corev1.Node   // same order as cluster.Nodes
	inv     []inventory.Node // same order
	byName  map[string]int   // node name -> index
	uuidPos []map[string]int // per node: GPU UUID -> position in Node.GPUs
	onNode  [][]booking      // per node: the pods booked there
	// sharing is per node how its agent shares its GPUs, read once per
	// snapshot, and sharings its distinct values: a pod every one of them
	// admits needs no per-node sharing check. Why no pod may go to a node
	// at all (usable: not Ready, unschedulable) is the engine node's
	// Closed, so that the policies' class index leaves such nodes out
	// without a per-pod view.
	sharing  []placement.NodeSharing
	sharings []placement.NodeSharing
	// tainted counts the nodes with a NoSchedule or NoExecute taint: while
	// none has, only a pod with node affinity needs a per-node check.
	tainted int
	// claims counts the allocated DRA claims booked (claims.go), and
	// claimHolds are what each takes, for the queue of the pod that holds
	// it (usage).
	claims     int
	claimHolds []claimHold
	// fresh are the bookings recorded since a cycle last emptied it (the
	// cycle's own, for its queues' ledger).
	fresh []booking
	// capacity is what the nodes hold in all (cycle.Capacity), for queue
	// shares: a snapshot's capacities never change (a node that reports
	// others makes a new snapshot).
	capacity queueing.Resources
}

// booking is a pod's share of a node as booked on the snapshot.
type booking struct {
	pod   *corev1.Pod
	parts []placed
	// exact is false when the booking had to saturate (it no longer fit),
	// so it cannot be released exactly; such a pod is never a victim.
	exact bool
	// shares is what its assignment grants (GPU compute and memory),
	// read once when it is booked (queue usage counts it every cycle).
	shares queueing.Resources
	// run is what a cycle reads of it, worked out on first use (runOf).
	run *bookedRun
}

// buildSnapshot makes a snapshot from nodes and the pods already on them
// (bound, or assumed by this scheduler). Nodes whose inventory cannot be
// read are left out and logged; nothing panics on a bad node.
func buildSnapshot(log *slog.Logger, src InventorySource, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot {
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	s := &snapshot{byName: map[string]int{}}
	for _, n := range sorted {
		in, err := src.Node(n)
		if err != nil {
			log.Warn("node left out of scheduling", "node", n.Name, "err", err)
			continue
		}
		s.byName[n.Name] = len(s.nodes)
		s.nodes = append(s.nodes, n)
		s.inv = append(s.inv, in)
	}
	cl, err := placement.FromInventory(s.inv)
	if err != nil {
		// Inventories come from InventorySource and are valid by construction;
		// if not, schedule nothing rather than on a wrong view.
		log.Error("invalid node inventory; scheduling paused", "err", err)
		cl = &placement.Cluster{}
		s.nodes, s.inv, s.byName = nil, nil, map[string]int{}
	}
	s.cluster, s.capacity = cl, cycle.Capacity(cl)
	s.onNode = make([][]booking, len(s.inv))
	s.uuidPos = make([]map[string]int, len(s.inv))
	s.sharing = make([]placement.NodeSharing, len(s.inv))
	for i := range s.inv {
		s.sharing[i] = placement.SharingOf(&s.inv[i])
		if !slices.Contains(s.sharings, s.sharing[i]) {
			s.sharings = append(s.sharings, s.sharing[i])
		}
		cl.Nodes[i].Closed = usable(s.nodes[i])
		s.tainted += tainted(s.nodes[i])
		m := map[string]int{}
		for pos, g := range cl.Nodes[i].GPUs {
			if in, ok := findGPU(&s.inv[i], g.Index); ok {
				m[in.UUID] = pos
			}
		}
		s.uuidPos[i] = m
	}
	for _, p := range pods {
		s.book(log, p)
	}
	return s
}

func findGPU(n *inventory.Node, index int) (inventory.GPU, bool) {
	g, ok := n.GPUByIndex(index)
	if !ok {
		return inventory.GPU{}, false
	}
	return *g, true
}

// book takes a running or assumed pod's resources off its node. A pod whose
// assignment no longer fits (inventory shrank, a GPU turned unhealthy) is
// still booked, saturating at zero, so the snapshot never shows capacity
// that is in use.
func (s *snapshot) book(log *slog.Logger, p *corev1.Pod) {
	ni, ok := s.byName[p.Spec.NodeName]
	if !ok {
		return
	}
	cpu, mem := podHostRequests(p)
	host := placement.Pod{Name: p.Namespace + "/" + p.Name, CPUMilli: cpu, MemoryMiB: mem}
	a, err := boundpods.Assignment(p)
	if err != nil {
		log.Warn("bound pod has a malformed assignment; its GPUs are not counted", "pod", host.Name, "err", err)
	}
	b := booking{pod: p, exact: true}
	if a != nil {
		b.shares = shareResources(*a)
	}
	defer func() { s.record(ni, b) }()
	if a == nil || len(a.Containers) == 0 {
		d := placement.Decision{Node: ni}
		b.exact = s.apply(log, &host, d)
		b.parts = append(b.parts, placed{pod: host, dec: d})
		return
	}
	for i, c := range a.Containers {
		pp := placement.Pod{Name: host.Name + "/" + c.Name, GPU: shareRequest(c.GPUs)}
		if i == 0 {
			pp.CPUMilli, pp.MemoryMiB = cpu, mem
		}
		d := placement.Decision{Node: ni}
		for _, g := range c.GPUs {
			uuid := g.UUID
			if g.MIG != nil {
				uuid = g.MIG.GPU
			}
			pos, ok := s.uuidPos[ni][uuid]
			if !ok {
				log.Warn("assignment names a GPU the node does not report", "pod", host.Name, "gpu", uuid)
				continue
			}
			d.GPUs = append(d.GPUs, pos)
			if g.MIG != nil {
				// A MIG instance books as the MIG request it answered.
				pp.GPU = request.GPU{ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: g.MIGProfile}
				d.MIG = append(d.MIG, s.migChoice(ni, pos, g))
			}
		}
		pp.GPU.Count = len(d.GPUs)
		if !s.apply(log, &pp, d) {
			b.exact = false
		}
		b.parts = append(b.parts, placed{pod: pp, dec: d})
	}
}

// migChoice is the engine choice that books a bound MIG share again: the
// instance by its UUID, or, for one the node was asked to create, the
// instance the node now reports at its start, else a creation at its start.
//
// The node publishes the instances its containers hold as in use: the
// instance this pod holds is freed here, so that booking the pod takes it
// again (instances no pod names stay in use: their slices stay taken).
func (s *snapshot) migChoice(ni, pos int, g binding.Share) placement.MIGChoice {
	m := s.cluster.Nodes[ni].GPUs[pos].MIG
	own := func(uuid string) {
		if m == nil {
			return
		}
		for k := range m.Instances {
			if m.Instances[k].UUID == uuid {
				m.Instances[k].InUse = false
			}
		}
	}
	if !g.MIG.Create {
		own(g.UUID)
		return placement.MIGChoice{Start: g.MIG.Start, UUID: g.UUID}
	}
	if m != nil {
		for _, in := range m.Instances {
			if in.Start == g.MIG.Start && strings.EqualFold(in.Profile, g.MIGProfile) {
				own(in.UUID)
				return placement.MIGChoice{Start: g.MIG.Start, UUID: in.UUID}
			}
		}
	}
	return placement.MIGChoice{Start: g.MIG.Start, Create: true}
}

// apply books with the engine's checked Apply and falls back to saturating
// subtraction when the booking no longer fits; it reports whether the
// booking was exact.
func (s *snapshot) apply(log *slog.Logger, p *placement.Pod, d placement.Decision) bool {
	err := s.cluster.Apply(p, d)
	if err == nil {
		return true
	}
	log.Warn("booking an existing pod over capacity", "pod", p.Name, "err", err)
	n := &s.cluster.Nodes[d.Node]
	n.FreeCPUMilli = max(0, n.FreeCPUMilli-p.CPUMilli)
	n.FreeMemoryMiB = max(0, n.FreeMemoryMiB-p.MemoryMiB)
	for _, gi := range d.GPUs {
		g := &n.GPUs[gi]
		g.FreeMilli = max(0, g.FreeMilli-p.GPU.ComputeMilli)
		g.FreeMemoryMiB = max(0, g.FreeMemoryMiB-p.GPU.MemoryMiB)
	}
	// Changed by hand: the policies' class indexes must key it again
	// (the snapshot lives on across cycles, snapshot_cache.go).
	s.cluster.Changed(d.Node)
	return false
}

// shareRequest turns one container's granted shares back into a request
// whose booking takes exactly those shares (compute and memory of the first
// share; a container's shares are identical per GPU).
func shareRequest(gpus []binding.Share) request.GPU {
	if len(gpus) == 0 {
		return request.GPU{}
	}
	g := gpus[0]
	return request.GPU{Count: len(gpus), ComputeMilli: g.ComputeMilli, ComputeLimitMilli: g.ComputeLimitMilli, MemoryMiB: g.MemoryMiB, MemoryLimitMiB: g.MemoryLimitMiB}
}

// podHostRequests is the pod's CPU (milli) and memory (MiB) requests as the
// kube-scheduler counts them (containers, init containers, overhead).
func podHostRequests(p *corev1.Pod) (cpuMilli, memMiB int64) {
	reqs := resource.PodRequests(p, resource.PodResourcesOptions{})
	if q, ok := reqs[corev1.ResourceCPU]; ok {
		cpuMilli = q.MilliValue()
	}
	if q, ok := reqs[corev1.ResourceMemory]; ok {
		memMiB = (q.Value() + (1 << 20) - 1) >> 20
	}
	return cpuMilli, memMiB
}

// record adds a booking on node ni.
func (s *snapshot) record(ni int, b booking) {
	s.onNode[ni] = append(s.onNode[ni], b)
	s.fresh = append(s.fresh, b)
}
