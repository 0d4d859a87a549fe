package placement

import "github.com/tessera-gpu/tessera/request"

// The class index: a policy's grouping of a cluster's nodes by class key
// (classkey.go), kept by the policy's chooser and brought up to date at
// the start of each decision from the cluster's change log
// (changelog.go): a node Apply or Release changed since the last decision
// is keyed again and moved to its new class. Each class keeps its nodes
// in a binary heap ordered by the chooser's tie order (rank), so the node
// a tie among the class's nodes would go to is at the top. The index
// belongs to one cluster (its change log, node count and node array);
// the chooser keeps those of the last two clusters (classCache).

// classIndex groups one cluster's nodes by class key.
type classIndex struct {
	// log, n and base identify the cluster followed: its change log,
	// node count and first node.
	log  *changeLog
	n    int
	base *Node
	// seen counts the log's changes already applied.
	seen      uint64
	keyShapes bool

	byKey   map[string]int32
	classes []nodeClass
	// live lists the ids of classes with nodes; spare the ids of emptied
	// classes, for reuse.
	live  []int32
	spare []int32
	// classOf and pos give each node's class and its position in the
	// class's members.
	classOf []int32
	pos     []int32
	// ordered is the generation of the chooser's rank the members' heaps
	// follow; 0 when they follow none (in any order).
	ordered uint64
	// reps holds a copy of one node's state per class (Nodes[k] for class
	// k, none for unique classes): the chooser scores these, which lie
	// close together in memory, rather than nodes spread over the cluster.
	reps Cluster
	// specs are the cluster's largest capacities; specsStale says a node
	// whose capacity may have changed (by hand: Apply and Release change
	// none) was keyed again since they were worked out.
	specs      specs
	specsStale bool
	buf        []byte
	// vers counts the class versions handed out (nodeClass.ver); memo
	// holds the chooser's remembered scores (classmemo.go).
	vers uint64
	memo classMemo
	// The hole counts (holeCounts), kept up to date by sync once asked
	// for (counted): each node's GPUs' free compute as last counted
	// (gpuFree from gpuAt[ni] to gpuAt[ni+1]), the partial holes by size
	// and the free compute.
	counted bool
	gpuAt   []int32
	gpuFree []int64
	holes   [request.Whole]float64
	free    float64
}

// nodeClass is one class: its key and its nodes.
type nodeClass struct {
	key string
	// members are the nodes, a min-heap by rank when the index is ordered.
	members []int32
	// top is members[0] and topRank its rank, kept while ordered.
	top, topRank int32
	// at is the class's position in live.
	at int32
	// unique: the key names one node (keyUnique), whose state the key
	// does not hold; it has no representative.
	unique bool
	// ver is new (never 0) whenever the class's state may be: when it is
	// made and, for a unique class, when its node changes.
	ver uint64
}

// newClassIndex groups c's nodes (c has a change log and at least one
// node). Its heaps are not ordered yet.
func newClassIndex(c *Cluster, keyShapes bool) *classIndex {
	n := len(c.Nodes)
	ix := &classIndex{
		log: c.log, n: n, base: &c.Nodes[0], seen: c.log.seq, keyShapes: keyShapes,
		byKey: map[string]int32{}, classOf: make([]int32, n), pos: make([]int32, n),
		specs: clusterSpecs(c),
	}
	for ni := range c.Nodes {
		ix.buf = appendClassKey(ix.buf[:0], &c.Nodes[ni], ni, keyShapes)
		ix.add(ix.classFor(ix.buf, &c.Nodes[ni]), int32(ni), nil)
	}
	return ix
}

// follows reports whether ix indexes c as it is laid out now.
func (ix *classIndex) follows(c *Cluster) bool {
	return ix.log == c.log && ix.n == len(c.Nodes) && ix.base == &c.Nodes[0]
}

// sync keys again the nodes changed since the last sync; rank orders the
// heaps when they follow rank generation gen. It returns false when the
// log no longer holds every change missed (the index must be rebuilt).
func (ix *classIndex) sync(c *Cluster, rank []int, gen uint64) bool {
	l := c.log
	if l.seq-ix.seen > changeLogSize {
		return false
	}
	if ix.ordered != gen || len(rank) != ix.n {
		ix.ordered, rank = 0, nil
	}
	for ; ix.seen < l.seq; ix.seen++ {
		ni := l.ring[ix.seen%changeLogSize]
		ix.buf = appendClassKey(ix.buf[:0], &c.Nodes[ni], int(ni), ix.keyShapes)
		old := ix.classOf[ni]
		if rep := &ix.reps.Nodes[old]; ix.classes[old].unique || !sameCapacity(rep, &c.Nodes[ni]) {
			ix.specsStale = true
		}
		if ix.classes[old].unique { // its state is not in its key
			ix.vers++
			ix.classes[old].ver = ix.vers
		}
		if ix.counted {
			ix.recount(&c.Nodes[ni], ni)
		}
		if ix.classes[old].key == string(ix.buf) {
			continue
		}
		ix.remove(ni, rank)
		ix.add(ix.classFor(ix.buf, &c.Nodes[ni]), ni, rank)
	}
	return true
}

// sameCapacity reports whether a and b have the capacities specs read.
func sameCapacity(a, b *Node) bool {
	return a.CPUMilli == b.CPUMilli && len(a.GPUs) == len(b.GPUs)
}

// clusterSpecs is clusterSpecs(c), worked out again from the classes
// when a capacity may have changed.
func (ix *classIndex) clusterSpecs(c *Cluster) specs {
	if !ix.specsStale {
		return ix.specs
	}
	var sp specs
	for _, k := range ix.live {
		n := &ix.reps.Nodes[k]
		if ix.classes[k].unique {
			n = &c.Nodes[ix.classes[k].members[0]]
		}
		sp.add(n)
	}
	ix.specs, ix.specsStale = sp.floor(), false
	return ix.specs
}

// classFor returns the id of the class with key, creating it, with n's
// state as its representative, if needed.
func (ix *classIndex) classFor(key []byte, n *Node) int32 {
	if k, ok := ix.byKey[string(key)]; ok {
		return k
	}
	var k int32
	if len(ix.spare) > 0 {
		k = ix.spare[len(ix.spare)-1]
		ix.spare = ix.spare[:len(ix.spare)-1]
	} else {
		k = int32(len(ix.classes))
		ix.classes = append(ix.classes, nodeClass{})
		ix.reps.Nodes = append(ix.reps.Nodes, Node{})
	}
	cl := &ix.classes[k]
	cl.key, cl.unique = string(key), key[0] == keyUnique
	ix.vers++
	cl.ver = ix.vers
	ix.byKey[cl.key] = k
	cl.at = int32(len(ix.live))
	ix.live = append(ix.live, k)
	rep := &ix.reps.Nodes[k]
	if cl.unique {
		*rep = Node{GPUs: rep.GPUs[:0]}
	} else {
		*rep = n.clone(append(rep.GPUs[:0], n.GPUs...))
	}
	return k
}

// add puts node ni into class k (sifting it up by rank when not nil).
func (ix *classIndex) add(k, ni int32, rank []int) {
	cl := &ix.classes[k]
	ix.classOf[ni] = k
	ix.pos[ni] = int32(len(cl.members))
	cl.members = append(cl.members, ni)
	if rank != nil {
		ix.up(cl, len(cl.members)-1, rank)
		cl.setTop(rank)
	}
}

// setTop records the heap's top and its rank.
func (cl *nodeClass) setTop(rank []int) {
	cl.top = cl.members[0]
	cl.topRank = int32(rank[cl.top])
}

// remove takes node ni out of its class, dropping the class when it is
// left empty.
func (ix *classIndex) remove(ni int32, rank []int) {
	k := ix.classOf[ni]
	cl := &ix.classes[k]
	i := int(ix.pos[ni])
	last := len(cl.members) - 1
	if i != last {
		moved := cl.members[last]
		cl.members[i] = moved
		ix.pos[moved] = int32(i)
	}
	cl.members = cl.members[:last]
	if len(cl.members) == 0 {
		ix.drop(k)
		return
	}
	if rank != nil {
		if i < last {
			ix.down(cl, i, rank)
			ix.up(cl, i, rank)
		}
		cl.setTop(rank)
	}
}

// drop retires the empty class k.
func (ix *classIndex) drop(k int32) {
	cl := &ix.classes[k]
	delete(ix.byKey, cl.key)
	cl.key = ""
	at := cl.at
	lastK := ix.live[len(ix.live)-1]
	ix.live[at] = lastK
	ix.classes[lastK].at = at
	ix.live = ix.live[:len(ix.live)-1]
	ix.spare = append(ix.spare, k)
}

// order makes every class's members a heap by rank (generation gen),
// unless they already are.
func (ix *classIndex) order(rank []int, gen uint64) {
	if ix.ordered == gen {
		return
	}
	for _, k := range ix.live {
		cl := &ix.classes[k]
		for i := len(cl.members)/2 - 1; i >= 0; i-- {
			ix.down(cl, i, rank)
		}
		cl.setTop(rank)
	}
	ix.ordered = gen
}

// up moves the member at i towards the root while its rank is lower than
// its parent's.
func (ix *classIndex) up(cl *nodeClass, i int, rank []int) {
	m := cl.members
	for i > 0 {
		parent := (i - 1) / 2
		if rank[m[parent]] <= rank[m[i]] {
			break
		}
		ix.swap(m, i, parent)
		i = parent
	}
}

// down moves the member at i towards the leaves while a child has a
// lower rank.
func (ix *classIndex) down(cl *nodeClass, i int, rank []int) {
	m := cl.members
	for {
		least := i
		if l := 2*i + 1; l < len(m) && rank[m[l]] < rank[m[least]] {
			least = l
		}
		if r := 2*i + 2; r < len(m) && rank[m[r]] < rank[m[least]] {
			least = r
		}
		if least == i {
			return
		}
		ix.swap(m, i, least)
		i = least
	}
}

func (ix *classIndex) swap(m []int32, i, j int) {
	m[i], m[j] = m[j], m[i]
	ix.pos[m[i]], ix.pos[m[j]] = int32(i), int32(j)
}

// holeCounts is what the hole-supply table reads of the cluster: the
// partial holes by size, set into holes, and the free GPU compute. The
// first call counts every node; sync then counts again only the GPUs of
// the nodes that changed. Each count and the sum are integers, exact in
// float64 whatever the order of addition, so they equal a pass over the
// nodes.
func (ix *classIndex) holeCounts(c *Cluster, holes *[request.Whole]float64) (free float64) {
	if !ix.counted {
		ix.countAll(c)
	}
	*holes = ix.holes
	return ix.free
}

// countAll counts every node's GPUs.
func (ix *classIndex) countAll(c *Cluster) {
	ix.holes, ix.free = [request.Whole]float64{}, 0
	ix.gpuAt, ix.gpuFree = ix.gpuAt[:0], ix.gpuFree[:0]
	for i := range c.Nodes {
		ix.gpuAt = append(ix.gpuAt, int32(len(ix.gpuFree)))
		for _, g := range c.Nodes[i].GPUs {
			ix.gpuFree = append(ix.gpuFree, g.FreeMilli)
			ix.count(g.FreeMilli, 1)
		}
	}
	ix.gpuAt = append(ix.gpuAt, int32(len(ix.gpuFree)))
	ix.counted = true
}

// recount counts node ni's GPUs again (n is its state now).
func (ix *classIndex) recount(n *Node, ni int32) {
	lo, hi := int(ix.gpuAt[ni]), int(ix.gpuAt[ni+1])
	if hi-lo != len(n.GPUs) { // GPUs added or removed by hand
		ix.counted = false
		return
	}
	for j := range n.GPUs {
		was, now := ix.gpuFree[lo+j], n.GPUs[j].FreeMilli
		if was != now {
			ix.count(was, -1)
			ix.count(now, 1)
			ix.gpuFree[lo+j] = now
		}
	}
}

// count adds (sign 1) or takes away (-1) a GPU with free compute free.
func (ix *classIndex) count(free int64, sign float64) {
	ix.free += sign * float64(free)
	if free > 0 && free < request.Whole {
		ix.holes[free] += sign
	}
}
