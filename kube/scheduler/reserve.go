package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/cycle"
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
	// The nodes: cycle.Reserve's choice (most free GPU compute among the
	// nodes each pod may use that could hold it, pod after pod).
	ws, err := s.workloadsOf(snap, pods)
	if err != nil {
		return // a pod that cannot be read is refused elsewhere
	}
	chosen, ok := cycle.Reserve(snap.cluster, ws)
	if !ok {
		return // some pod can use no node at all: reserving would only block others
	}
	nodes := map[string]bool{}
	for i := range chosen {
		nodes[snap.nodes[i].Name] = true
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
