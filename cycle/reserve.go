package cycle

import (
	"fmt"
	"slices"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// Reservation holds nodes for the workload, or the gang, that has waited
// longest, so that a stream of smaller workloads cannot starve it: other
// workloads may use a reserved node only where everything the reservation
// holds room for still fits beside them (backfill). When to reserve, and
// for whom, is the caller's (it knows how long each has waited); Reserve
// chooses the nodes.
type Reservation struct {
	// What names it in rejections ("a pod waiting longer").
	What string
	// Nodes are the reserved nodes, by index in the snapshot's cluster.
	Nodes map[int]bool
	// For are the workloads it holds room for, in the order they are
	// placed when backfill is checked.
	For []Workload
	// Members are the IDs of the workloads that use the reserved nodes
	// freely: For's, and a gang's other pending members.
	Members map[string]bool
}

// Reserve chooses nodes for ws, one each, in order: among the nodes a
// workload may use (its Exclude, and a GPU of an allowed model for each of
// its parts that asks for GPUs), the one with the most free GPU compute
// among those whose GPUs could hold its compute at all (any it may use when
// none could), less what the workloads before it were given. ok is false
// when some workload may use no node: reserving would only block others.
func Reserve(c *placement.Cluster, ws []Workload) (nodes map[int]bool, ok bool) {
	free := make([]int64, len(c.Nodes))
	room := make([]int64, len(c.Nodes))
	for i := range c.Nodes {
		for _, g := range c.Nodes[i].GPUs {
			free[i] += g.FreeMilli
		}
		room[i] = request.Whole * int64(len(c.Nodes[i].GPUs))
	}
	nodes = map[int]bool{}
	for _, w := range ws {
		need := gpuMilli(w.Parts)
		best, bestRoomy := -1, false
		for i := range c.Nodes {
			if (w.Exclude != nil && w.Exclude(i) != "") || !modelsOn(&c.Nodes[i], w.Parts) {
				continue
			}
			roomy := room[i] >= need
			if best < 0 || (roomy && !bestRoomy) || (roomy == bestRoomy && free[i] > free[best]) {
				best, bestRoomy = i, roomy
			}
		}
		if best < 0 {
			return nil, false
		}
		free[best] -= need
		room[best] -= need
		nodes[best] = true
	}
	return nodes, true
}

// modelsOn reports whether node n has, for each part that asks for GPUs
// of given models, a GPU of one of them: a node without is no use to the
// workload, and reserving it would only block others.
func modelsOn(n *placement.Node, parts []placement.Pod) bool {
	for _, p := range parts {
		if p.GPU.Count == 0 || len(p.GPU.Models) == 0 {
			continue
		}
		if !slices.ContainsFunc(n.GPUs, func(g placement.GPU) bool { return slices.Contains(p.GPU.Models, g.Model) }) {
			return false
		}
	}
	return true
}

// gpuMilli is the GPU compute parts ask for, in thousandths of a GPU; a
// GPU asked for without compute (memory only, a MIG instance) counts one
// thousandth: its size depends on the GPU.
func gpuMilli(parts []placement.Pod) int64 {
	var m int64
	for _, p := range parts {
		m += int64(p.GPU.Count) * max(p.GPU.ComputeMilli, 1)
	}
	return m
}

// Fits reports whether everything the reservation holds room for fits on
// c, each workload of For placed in order (by its policy, else pol) on a
// copy: c is not changed. Callers pass the cluster with the candidate's
// booking applied, to check a backfill.
func (res *Reservation) Fits(c *placement.Cluster, pol placement.Policy) (bool, error) {
	sub := &run{snap: Snapshot{Cluster: c.Clone(), Policy: pol}}
	st := NewStatement(sub.snap.Cluster)
	for _, w := range res.For {
		o, err := sub.place(st, w)
		if err != nil {
			return false, fmt.Errorf("reservation for %s: %w", res.What, err)
		}
		if o.Status != Placed {
			return false, nil
		}
	}
	return true, nil
}

// holds reports whether w is one of the reservation's members (false
// without a reservation).
func (res *Reservation) holds(w Workload) bool { return res != nil && res.Members[w.ID] }

// blocks reports whether placing w on node would break the reservation: w
// is not a member, node is reserved, and with w booked (in the cluster
// already) the reservation's workloads no longer fit.
func (res *Reservation) blocks(c *placement.Cluster, pol placement.Policy, w Workload, node int) (bool, error) {
	if res == nil || res.holds(w) || !res.Nodes[node] {
		return false, nil
	}
	fits, err := res.Fits(c, pol)
	return !fits, err
}
