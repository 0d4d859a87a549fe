package dispatch

import (
	"cmp"
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
)

// nomination is the room a workload or gang that named victims counts on
// (cycle.Nomination, kube-scheduler's nominated node), kept between cycles
// until it is placed, leaves, is respecified, or is tried and not placed
// once its wait for the victims is over (then it may name others).
type nomination struct {
	what  string
	prio  int32
	at    time.Time // when it named its victims
	until time.Time // its wait for them ends
	// members are its plan: each workload's translation then, and its
	// node by name (the frame's indexes change).
	members []nominee
	// victims are those of its victims still running at the last cycle.
	victims []string
}

type nominee struct {
	w    cycle.Workload
	node string
}

// nominate records the plan of o, whose unit u named victims at now.
func (c *Core) nominate(u *unit, s *state, o cycle.Outcome, f Frame, now time.Time) {
	what := c.cfg.Noun + " " + s.ID // "pod ns/p"
	if c.cfg.Noun == "" {
		what = "workload " + s.ID
	}
	if u.gang != "" {
		what = "gang " + u.gang
	}
	n := &nomination{what: what, prio: s.Priority, at: now, until: s.preemptUntil}
	for _, p := range o.Plan {
		n.members = append(n.members, nominee{w: p.Workload, node: f.Cluster.Nodes[p.Node].Name})
	}
	for _, v := range o.Victims {
		n.victims = append(n.victims, v.ID)
	}
	c.noms[u.key] = n
}

// nominationsFor puts the nominations in the frame's terms, the higher
// priority first (then the earlier): their victims that have stopped are
// forgotten, and one whose node is gone is dropped (its room with it).
// onBooks says the frame's cluster and running workloads are the books',
// which look each node and victim up; otherwise the frame's are indexed
// (O(cluster) a cycle while any nomination is in force).
func (c *Core) nominationsFor(f Frame, onBooks bool) []cycle.Nomination {
	if len(c.noms) == 0 {
		return nil
	}
	index, running := c.books.Index, c.books.Booked
	if !onBooks {
		byName := make(map[string]int, len(f.Cluster.Nodes))
		for i := range f.Cluster.Nodes {
			byName[f.Cluster.Nodes[i].Name] = i
		}
		ids := make(map[string]bool, len(f.Running))
		for i := range f.Running {
			ids[f.Running[i].ID] = true
		}
		index = func(name string) (int, bool) { i, ok := byName[name]; return i, ok }
		running = func(id string) bool { return ids[id] }
	}
	keys := make([]string, 0, len(c.noms))
	for k := range c.noms {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		na, nb := c.noms[a], c.noms[b]
		if na.prio != nb.prio {
			return cmp.Compare(nb.prio, na.prio)
		}
		if d := na.at.Compare(nb.at); d != 0 {
			return d
		}
		return cmp.Compare(a, b)
	})
	out := make([]cycle.Nomination, 0, len(keys))
	for _, k := range keys {
		n := c.noms[k]
		n.victims = slices.DeleteFunc(n.victims, func(id string) bool { return !running(id) })
		cn := cycle.Nomination{What: n.what, Victims: slices.Clone(n.victims)}
		for _, m := range n.members {
			i, ok := index(m.node)
			if !ok {
				cn.For = nil
				break
			}
			cn.For = append(cn.For, cycle.Nominee{Workload: m.w, Node: i})
		}
		if cn.For == nil {
			delete(c.noms, k)
			continue
		}
		out = append(out, cn)
	}
	return out
}

// NominatedNodes are the nodes whose room is held for workloads that named
// victims there (sorted): a front door that tracks which nodes gained room
// (Frame.Skip) counts them as gaining it when the hold ends.
func (c *Core) NominatedNodes() []string {
	var out []string
	for _, n := range c.noms {
		for _, m := range n.members {
			out = append(out, m.node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
