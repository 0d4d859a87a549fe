package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

// reservation holds nodes for the pod, or the gang, that has waited longest
// past Config.ReservationWait, so that a stream of smaller pods cannot
// starve it: other pods may use a reserved node only where everything the
// reservation holds room for still fits beside them (backfill).
type reservation struct {
	key     string        // blockKey of the pod or gang
	what    string        // how rejections name it
	pods    []*corev1.Pod // the pods it holds room for (a gang's members still needed)
	members map[types.UID]bool
	nodes   map[string]bool
}

// holds reports whether the reservation is for pod (any member of a gang).
func (r *reservation) holds(pod *corev1.Pod) bool { return r.members[pod.UID] }

// blockedSince is when a pod or gang first failed to fit, and which pods it
// is made of (to forget it once they are gone).
type blockedSince struct {
	since time.Time
	uids  []types.UID
}

func podBlockKey(pod *corev1.Pod) string { return "pod/" + string(pod.UID) }
func gangBlockKey(key string) string     { return "gang/" + key }

// maybeReserve records when the pod first failed to fit and, once it has
// waited ReservationWait with no reservation in force, reserves for it the
// eligible node with the most free GPU compute that could hold it.
func (s *Scheduler) maybeReserve(snap *snapshot, pod *corev1.Pod) {
	s.maybeReserveFor(snap, podBlockKey(pod), "a pod waiting longer", []*corev1.Pod{pod}, []*corev1.Pod{pod})
}

// maybeReserveGang does the same for the members a gang still needs
// (needed, a prefix of its pending members): one node per member, chosen
// greedily as for a pod after the members before it were given theirs.
// Every pending member may use the reserved nodes.
func (s *Scheduler) maybeReserveGang(snap *snapshot, g *gang, needed []*corev1.Pod) {
	s.maybeReserveFor(snap, gangBlockKey(g.key), "gang "+g.key+" waiting longer", needed, g.pending)
}

// maybeReserveFor reserves nodes with room for pods, usable by members.
func (s *Scheduler) maybeReserveFor(snap *snapshot, key, what string, pods, members []*corev1.Pod) {
	if s.cfg.ReservationWait <= 0 || len(pods) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blocked[key]
	if !ok {
		uids := make([]types.UID, len(pods))
		for i, p := range pods {
			uids[i] = p.UID
		}
		s.blocked[key] = blockedSince{since: time.Now(), uids: uids}
		return
	}
	if s.reserved != nil && s.reserved.key == key {
		s.reserved.pods, s.reserved.members = pods, uidSet(members) // fresh copies for backfill checks
		return
	}
	if s.reserved != nil || time.Since(b.since) < s.cfg.ReservationWait {
		return
	}
	// free is each node's free GPU compute and room its capacity (1000
	// per GPU), both less what earlier pods were given: a pod goes to the
	// eligible node with the most free compute among those with room for
	// it (any eligible node when none has room).
	free := make([]int64, len(snap.cluster.Nodes))
	room := make([]int64, len(snap.cluster.Nodes))
	for i, n := range snap.cluster.Nodes {
		for _, g := range n.GPUs {
			free[i] += g.FreeMilli
		}
		room[i] = request.Whole * int64(len(n.GPUs))
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		need := s.gpuMilli(p)
		best, bestRoomy := -1, false
		for i, n := range snap.nodes {
			roomy := room[i] >= need
			better := best < 0 || (roomy && !bestRoomy) || (roomy == bestRoomy && free[i] > free[best])
			if better && eligibleNoTaints(p, n) {
				best, bestRoomy = i, roomy
			}
		}
		if best < 0 {
			return // some pod can use no node at all: reserving would only block others
		}
		free[best] -= need
		room[best] -= need
		nodes[snap.nodes[best].Name] = true
	}
	s.reserved = &reservation{key: key, what: what, pods: pods, members: uidSet(members), nodes: nodes}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	s.cfg.Log.Info("reserved nodes for long-blocked pods", "for", what, "pods", len(pods), "nodes", names)
}

func uidSet(pods []*corev1.Pod) map[types.UID]bool {
	m := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		m[p.UID] = true
	}
	return m
}

// gpuMilli is the GPU compute a pod asks for, in thousandths of a GPU
// (memory-only shares count as one thousandth: their size depends on the GPU).
func (s *Scheduler) gpuMilli(pod *corev1.Pod) int64 {
	reqs, err := workload.FromPod(pod, s.cfg.Catalog)
	if err != nil {
		return 0
	}
	var m int64
	for _, r := range reqs {
		m += int64(r.GPU.Count) * max(r.GPU.ComputeMilli, 1)
	}
	return m
}

// unblock forgets a pod's wait, and its reservation once it is placed.
func (s *Scheduler) unblock(pod *corev1.Pod) { s.unblockKey(podBlockKey(pod)) }

// unblockKey forgets a pod's or a gang's wait and its reservation.
func (s *Scheduler) unblockKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blocked, key)
	if s.reserved != nil && s.reserved.key == key {
		s.reserved = nil
	}
}

// reservedNodes returns the nodes reserved for pods other than pod (nil
// when there are none) and how rejections should name the reservation.
func (s *Scheduler) reservedNodes(pod *corev1.Pod) (map[string]bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserved == nil || s.reserved.holds(pod) {
		return nil, ""
	}
	return s.reserved.nodes, s.reserved.what
}

// backfillOK reports whether a plan respects the reservation: the plan is
// not on a reserved node, is for a reserved pod, or leaves room on the
// reserved nodes for every pod the reservation holds.
func (s *Scheduler) backfillOK(snap *snapshot, pod *corev1.Pod, pl plan) bool {
	s.mu.Lock()
	r := s.reserved
	s.mu.Unlock()
	if r == nil || r.holds(pod) || !r.nodes[pl.assignment.Node] {
		return true
	}
	scratch := snap.scratch()
	s.book(scratch, pod, pl)
	for _, p := range r.pods {
		rp, o, _ := s.plan(scratch, p)
		if o != outcomeBound {
			return false
		}
		s.book(scratch, p, rp)
	}
	return true
}

// planRespecting is plan that honours the reservation: a plan that would
// delay the reserved pods is replaced by one that avoids the reserved nodes.
func (s *Scheduler) planRespecting(snap *snapshot, pod *corev1.Pod) (plan, outcome, string) {
	pl, o, msg := s.plan(snap, pod)
	if o == outcomeBound && !s.backfillOK(snap, pod, pl) {
		nodes, what := s.reservedNodes(pod)
		pl, o, msg = s.planExcept(snap, pod, nodes, what)
	}
	return pl, o, msg
}

// gcReservations forgets waits and reservations whose pods are gone or placed.
func (s *Scheduler) gcReservations(seen map[types.UID]bool, occupying []*corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	placed := map[types.UID]bool{}
	for _, p := range occupying {
		placed[p.UID] = true
	}
	waiting := func(uids []types.UID) bool {
		for _, u := range uids {
			if seen[u] && !placed[u] {
				return true
			}
		}
		return false
	}
	for key, b := range s.blocked {
		if !waiting(b.uids) {
			delete(s.blocked, key)
		}
	}
	if r := s.reserved; r != nil {
		uids := make([]types.UID, len(r.pods))
		for i, p := range r.pods {
			uids[i] = p.UID
		}
		if !waiting(uids) {
			s.reserved = nil
		}
	}
}

// eligibleNoTaints applies the pod's node constraints to a node.
func eligibleNoTaints(pod *corev1.Pod, n *corev1.Node) bool {
	return eligible(pod, nodeaffinity.GetRequiredNodeAffinity(pod), n) == ""
}
