package placement

import "strings"

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
// changes a node by hand must call Changed. The decision is the same as
// node by node (mig_property_test.go replays random streams both ways).

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
