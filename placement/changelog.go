package placement

// The change log: Apply and Release record which node they changed, so
// that a policy's class index (classindex.go) follows a cluster it has
// indexed by re-keying only the nodes changed since its last decision.
// The log is the cluster's only record of changes: a caller that changes
// a node by hand (not through Apply or Release) after policies have
// placed on the cluster must call Changed for that node, or the indexes
// keep its old state. Replacing Nodes, or changing how many there are, is
// noticed without it (the index then rebuilds).
//
// The log keeps the last changeLogSize changed nodes in a ring; a reader
// that fell further behind rebuilds its index from the nodes. Place only
// reads the log, so a cluster that is not being changed may still be
// read by several goroutines at once.

// changeLogSize is how many changes the ring keeps. A reader syncs before
// every decision, usually one change behind; a burst larger than this
// (many releases between two decisions) costs one rebuild, about as much
// as one node-by-node decision.
const changeLogSize = 4096

// changeLog records the nodes Apply and Release changed.
type changeLog struct {
	// seq counts the changes recorded; change s is at ring[s%changeLogSize].
	seq  uint64
	ring []int32
}

// record notes that node ni changed.
func (c *Cluster) record(ni int) {
	if c.log == nil {
		c.log = &changeLog{}
	}
	l := c.log
	if len(l.ring) < changeLogSize {
		l.ring = append(l.ring, int32(ni))
	} else {
		l.ring[l.seq%changeLogSize] = int32(ni)
	}
	l.seq++
}

// Changed tells the policies that index the cluster that node ni was
// changed by hand (its free resources, GPUs, topology or shape counts set
// directly rather than by Apply or Release). Apply and Release record
// their own changes; a snapshot that is built by hand and only then
// placed on needs no call.
func (c *Cluster) Changed(ni int) {
	if ni >= 0 && ni < len(c.Nodes) {
		c.record(ni)
	}
}
