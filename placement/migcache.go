package placement

import (
	"slices"
	"sort"
	"strings"
)

// Remembering what a node offers MIG requests.
//
// A MIG decision asks every node with the CPU and memory what its GPUs
// offer (migNodeOption): the planner's option on each GPU, the node's
// cost and GPUs, and for the host term the usable slices of its GPUs and
// those the choice takes (migNodeHost; the term itself, which reads the
// node's free CPU and memory, is worked out per decision). That depends
// only on the node's GPUs, the planner and
// the request's profile, count and allowed models, so the chooser keeps
// it per node and request kind and asks again only when the node has
// changed since. Changes are read from the cluster's change log
// (changelog.go), as the class index reads them: a cluster without a log
// (a view built for one decision) is asked node by node, and a caller that
// changes a node by hand must call Changed. The planner also keeps each
// kind's nodes grouped by a lower bound of their cost (migOrder), so a
// decision reads only the nodes that may still win. The decision is the
// same as node by node (migcache_test.go replays random streams both
// ways).

// migMemoKinds caps the request kinds remembered at once; past it the
// memo starts again.
const migMemoKinds = 64

// migNodeMemo is a chooser's memo of node offers.
type migNodeMemo struct {
	// log, seq, first and n identify the cluster followed and how far its
	// log was read.
	log   *changeLog
	seq   uint64
	first *Node
	n     int
	// pl is the planner the offers were priced with.
	pl migPlanner
	// ver counts each node's changes seen; an entry holds ver+1 of when
	// it was computed.
	ver   []uint64
	kinds map[migKind]*migKindMemo
	// scratch is reused to compute an offer.
	scratch []migCand
}

// migKind is what of a request an offer depends on.
type migKind struct {
	profile, models string
	want            int
}

// migKindMemo holds one request kind's offers, by node.
type migKindMemo struct {
	memo    *migNodeMemo
	entries []migOffer
	// order holds the nodes by bound, for planners other than first fit
	// (migOrder); nil until the kind is first decided so.
	order *migOrder
}

// migOrder keeps a kind's nodes that have an offer in groups by a lower
// bound of their cost, each group in the fixed node order: the bound is
// the offer's slot cost less the host term's floor, the usable slices
// the offer takes, or 0 on a node whose host feeds all its slices
// (migHostPricer.feeds: its host term is X after, never below 0). A
// decision visits the groups in ascending bound (chooseMIG). Nodes change
// one at a time between decisions (the change log): only those move.
type migOrder struct {
	gen     uint64 // the pricer's supply the bounds were worked out for
	rankGen uint64 // the chooser's tie order the groups follow
	rank    []int  // that order (nil: the nodes' own)
	keys    []float64
	groups  map[float64]*migGroup
	key     []float64 // each node's bound
	in      []bool    // whether the node is in a group
	done    []uint64  // the offer version each node was grouped by
	dirty   []int     // nodes changed since the order was brought up to date
}

// migGroup is the nodes of one bound, in the fixed order; unfed counts
// those whose host does not feed all their slices (their cost may fall
// below the bound by rounding, and the early stop is off).
type migGroup struct {
	nodes []int
	unfed int
	fed   []bool // per position in nodes
}

// orderOf returns km's order, brought up to date: built on first use (or
// when the pricer's supply or the chooser's tie order changed) from every
// node's offer, then moving only the nodes changed since.
func (km *migKindMemo) orderOf(c *Cluster, p *Pod, pl migPlanner, want int, gen uint64, rank []int, rankGen uint64) *migOrder {
	o := km.order
	if o == nil || o.gen != gen || o.rankGen != rankGen || (rank == nil) != (o.rank == nil) {
		o = &migOrder{gen: gen, rankGen: rankGen, rank: rank, groups: map[float64]*migGroup{},
			key: make([]float64, len(c.Nodes)), in: make([]bool, len(c.Nodes)), done: make([]uint64, len(c.Nodes))}
		for ni := range c.Nodes {
			o.dirty = append(o.dirty, ni)
		}
		km.order = o
	}
	hp, _ := pl.(migHostPricer)
	for _, ni := range o.dirty {
		n := &c.Nodes[ni]
		e := km.at(ni, n, p, pl, false, want)
		if o.in[ni] && o.done[ni] == e.ver {
			continue // listed twice: already moved
		}
		o.done[ni] = e.ver
		o.remove(ni)
		if !e.ok {
			continue
		}
		key, fed := e.cost, true
		if hp != nil {
			if fed = hp.feeds(n, &e.host); !fed {
				key -= max(0, e.host.took)
			}
		}
		o.insert(ni, key, fed)
	}
	o.dirty = o.dirty[:0]
	return o
}

// at is node ni's place in the fixed order.
func (o *migOrder) at(ni int) int {
	if o.rank != nil {
		return o.rank[ni]
	}
	return ni
}

func (o *migOrder) insert(ni int, key float64, fed bool) {
	g, ok := o.groups[key]
	if !ok {
		g = &migGroup{}
		o.groups[key] = g
		i := sort.SearchFloat64s(o.keys, key)
		o.keys = slices.Insert(o.keys, i, key)
	}
	r := o.at(ni)
	i := sort.Search(len(g.nodes), func(k int) bool { return o.at(g.nodes[k]) >= r })
	g.nodes = slices.Insert(g.nodes, i, ni)
	g.fed = slices.Insert(g.fed, i, fed)
	if !fed {
		g.unfed++
	}
	o.key[ni], o.in[ni] = key, true
}

func (o *migOrder) remove(ni int) {
	if !o.in[ni] {
		return
	}
	o.in[ni] = false
	key := o.key[ni]
	g := o.groups[key]
	r := o.at(ni)
	i := sort.Search(len(g.nodes), func(k int) bool { return o.at(g.nodes[k]) >= r })
	if !g.fed[i] {
		g.unfed--
	}
	g.nodes = slices.Delete(g.nodes, i, i+1)
	g.fed = slices.Delete(g.fed, i, i+1)
	if len(g.nodes) > 0 {
		return
	}
	delete(o.groups, key)
	if k := sort.SearchFloat64s(o.keys, key); k < len(o.keys) && o.keys[k] == key {
		o.keys = slices.Delete(o.keys, k, k+1)
	}
}

// migOffer is a node's remembered offer.
type migOffer struct {
	ver  uint64
	ok   bool
	cost float64
	// host is what the node's GPUs give a migHostPricer.
	host migNodeHost
	// one holds the GPU of a one-instance request, more those of others.
	one  migCand
	more []migCand
}

// appendGPUs appends the offer's GPUs to dst.
func (o *migOffer) appendGPUs(dst []migCand, want int) []migCand {
	if want == 1 {
		return append(dst, o.one)
	}
	return append(dst, o.more...)
}

// entries returns the memo for p's kind on c under pl, brought up to date
// with c's change log, or nil when c has no log (or no nodes).
func (m *migNodeMemo) entries(c *Cluster, pl migPlanner, p *Pod) *migKindMemo {
	if c.log == nil || len(c.Nodes) == 0 {
		return nil
	}
	l := c.log
	if m.log != l || m.n != len(c.Nodes) || m.first != &c.Nodes[0] || m.pl != pl || l.seq-m.seq > changeLogSize || len(m.kinds) >= migMemoKinds {
		m.log, m.seq, m.first, m.n, m.pl = l, l.seq, &c.Nodes[0], len(c.Nodes), pl
		m.ver = make([]uint64, len(c.Nodes))
		m.kinds = map[migKind]*migKindMemo{}
	}
	for ; m.seq < l.seq; m.seq++ {
		if ni := int(l.ring[m.seq%changeLogSize]); ni >= 0 && ni < len(m.ver) {
			m.ver[ni]++
			for _, km := range m.kinds {
				switch {
				case km.order == nil:
				case len(km.order.dirty) >= len(m.ver): // cheaper to build again
					km.order = nil
				default:
					km.order.dirty = append(km.order.dirty, ni)
				}
			}
		}
	}
	k := migKind{profile: p.GPU.MIGProfile, want: p.GPUCount()}
	if len(p.GPU.Models) > 0 {
		k.models = strings.Join(p.GPU.Models, "\x00")
	}
	km := m.kinds[k]
	if km == nil {
		km = &migKindMemo{memo: m, entries: make([]migOffer, len(c.Nodes))}
		m.kinds[k] = km
	}
	return km
}

// at returns node ni's offer, computing it when the node changed since.
func (km *migKindMemo) at(ni int, n *Node, p *Pod, pl migPlanner, first bool, want int) *migOffer {
	m := km.memo
	e := &km.entries[ni]
	if e.ver == m.ver[ni]+1 {
		return e
	}
	cost, cands, ok := migNodeOption(n, p, pl, first, want, m.scratch[:0])
	m.scratch = cands
	*e = migOffer{ver: m.ver[ni] + 1, ok: ok, cost: cost}
	if hp, isHP := pl.(migHostPricer); ok && isHP {
		e.host = hp.nodeHost(n, cands, want)
	}
	switch {
	case !ok:
	case want == 1:
		e.one = cands[0]
	default:
		e.more = append([]migCand(nil), cands[:want]...)
	}
	return e
}
