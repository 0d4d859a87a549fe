package dispatch

import (
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
)

// reservation holds nodes for the workload, or the gang, that has waited
// longest past Config.ReservationWait, so that a stream of smaller
// workloads cannot starve it: others may use a reserved node only where
// everything the reservation holds room for still fits beside them
// (backfill, checked by package cycle).
type reservation struct {
	key  string // the workload's or gang's key
	what string // how rejections name it
	// forIDs are the workloads it holds room for (a gang's members still
	// needed), members those that use the reserved nodes freely.
	forIDs  []string
	members []string
	nodes   map[string]bool // by node name: the frame's indexes change
}

func (r *reservation) nodeNames() []string {
	out := make([]string, 0, len(r.nodes))
	for n := range r.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// drop forgets a workload that is gone.
func (r *reservation) drop(id string) {
	r.forIDs = slices.DeleteFunc(r.forIDs, func(x string) bool { return x == id })
	r.members = slices.DeleteFunc(r.members, func(x string) bool { return x == id })
}

// unblock forgets key's wait and its reservation (placed, or refused).
func (c *Core) unblock(key string) {
	delete(c.blocked, key)
	if c.res != nil && c.res.key == key {
		c.res = nil
	}
}

// maybeReserve records when key first failed to fit and, once it has
// waited ReservationWait with no reservation in force, reserves for the
// workloads forIDs (one node each, cycle.Reserve's choice) nodes that
// members may use freely.
func (c *Core) maybeReserve(now time.Time, f Frame, tr *translations, key, what string, forIDs, members []string) {
	if c.cfg.ReservationWait <= 0 || len(forIDs) == 0 {
		return
	}
	since, ok := c.blocked[key]
	if !ok {
		c.blocked[key] = now
		return
	}
	if c.res != nil && c.res.key == key {
		c.res.forIDs, c.res.members = forIDs, members // the members still needed now
		return
	}
	if c.res != nil || now.Sub(since) < c.cfg.ReservationWait {
		return
	}
	ws := make([]cycle.Workload, 0, len(forIDs))
	for _, id := range forIDs {
		w, err := tr.get(id)
		if err != nil {
			return // refused elsewhere
		}
		ws = append(ws, w)
	}
	chosen, ok := cycle.Reserve(f.Cluster, ws)
	if !ok {
		return // some workload can use no node at all: reserving would only block others
	}
	nodes := map[string]bool{}
	for i := range chosen {
		nodes[f.Cluster.Nodes[i].Name] = true
	}
	c.res = &reservation{key: key, what: what + " waiting longer", forIDs: forIDs, members: members, nodes: nodes}
}

// reservationFor is the reservation in force as the cycle's: its nodes by
// index in the frame, the workloads it holds room for, and the ones that
// may use it. nil when there is none or it cannot be translated.
func (c *Core) reservationFor(f Frame, tr *translations, pending map[string]*state) *cycle.Reservation {
	r := c.res
	if r == nil {
		return nil
	}
	res := &cycle.Reservation{What: r.what, Nodes: map[int]bool{}, Members: map[string]bool{}}
	for _, id := range r.forIDs {
		w, err := tr.get(id)
		if err != nil {
			return nil
		}
		res.For = append(res.For, w)
		res.Members[id] = true
	}
	for _, id := range r.members {
		if _, ok := pending[id]; ok {
			res.Members[id] = true
		}
	}
	for i := range f.Cluster.Nodes {
		if r.nodes[f.Cluster.Nodes[i].Name] {
			res.Nodes[i] = true
		}
	}
	return res
}
