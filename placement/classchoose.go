package placement

import "math"

// Scoring by class. A policy whose node score depends only on the node's
// class key (classkey.go) scores each class once instead of every node:
// the decision is the feasible node with the highest score, ties to the
// lowest rank, which is the top of the best class's heap (of tied
// classes, the one whose top ranks lowest). The class's score is taken
// on its representative, a copy of one member's state kept beside the
// other classes' (scanning those is far cheaper than visiting nodes
// spread over a large cluster); the chosen node is then scored itself
// for its GPUs, which are those the node-by-node chooser would name, so
// the decision is the same, node and GPUs (class_test.go replays random
// clusters both ways and checks that every member of a class scores
// like its representative).
//
// The chooser scores by class only where that is sure to be the same:
//   - the cluster has a change log (Apply or Release has run on it: a
//     view a caller builds for one decision is scored node by node, and
//     costs no index), at least classMinNodes nodes, and was met in an
//     earlier decision (classCache);
//   - the tie order is drawn for the cluster's size (the node-by-node
//     chooser draws it from the seeded source at the first tie it meets,
//     and the class chooser must not draw it at another time);
//   - the pod is classSafe (not MIG, not a multi-GPU share);
//   - no class scores NaN (the node-by-node chooser lets a NaN win only as
//     the first feasible node; the decision is then made node by node),
//     and the chosen node scores as its class did (a safeguard: it does).
//
// Random, whose scores are random draws, never scores by class.

// classMinNodes is the smallest cluster scored by class by default.
const classMinNodes = 64

// classSettings say whether and how a chooser scores by class.
type classSettings struct {
	// on: the policy's score depends only on the class key.
	on bool
	// shapes: the key holds the shapes booked on the node (GpuClustering
	// reads them).
	shapes bool
	// off turns scoring by class off (tests and benchmarks compare).
	off bool
	// minNodes overrides classMinNodes when positive.
	minNodes int
	// noMemo turns remembered scores off (benchmarks compare);
	// remembered counts the class scores taken from the memo (tests).
	noMemo     bool
	remembered int
	// check, when set, is called before each decision made by class
	// (tests check the classes with it).
	check func(c *Cluster, ix *classIndex, pf *podFit, score nodeScore)
}

// withClasses returns ch set to score by class; shapes puts the shapes
// booked on a node into its key.
func withClasses(ch chooser, shapes bool) chooser {
	ch.class = classSettings{on: true, shapes: shapes}
	return ch
}

// classCache holds a chooser's class indexes: those of the last two
// clusters it scored by class (most recent first, so that a caller
// alternating between its cluster and a copy it tries things on keeps
// both), and a cluster met once. A cluster is indexed the second
// decision it is met in: one met once (a copy for one decision) is scored
// node by node and costs no index. An index keeps its cluster's node
// array alive.
type classCache struct {
	ixs [2]*classIndex
	// pending is the change log of the cluster met without an index in
	// decision pendingAt.
	pending   *changeLog
	pendingAt uint64
	// decisions counts the chooser's decisions (choose counts them).
	decisions uint64
}

// classes returns the chooser's class index for c, brought up to date,
// or nil when c is not scored by class (see above; the tie order and the
// pod are checked by chooseClasses).
func (ch *chooser) classes(c *Cluster) *classIndex {
	s, cc := &ch.class, &ch.cache
	minNodes := classMinNodes
	if s.minNodes > 0 {
		minNodes = s.minNodes
	}
	if !s.on || s.off || ch.rank == nil || c.log == nil || len(c.Nodes) < max(1, minNodes) {
		return nil
	}
	for i, ix := range cc.ixs {
		if ix == nil || ix.log != c.log {
			continue
		}
		if !ix.follows(c) || !ix.sync(c, ch.rank, ch.rankGen) {
			ix = newClassIndex(c, s.shapes)
		}
		cc.ixs[i], cc.ixs[0] = cc.ixs[0], ix
		return ix
	}
	if cc.pending != c.log || cc.pendingAt == cc.decisions {
		cc.pending, cc.pendingAt = c.log, cc.decisions
		return nil
	}
	cc.pending = nil
	cc.ixs[1], cc.ixs[0] = cc.ixs[0], newClassIndex(c, s.shapes)
	return cc.ixs[0]
}

// specs is clusterSpecs(c), from the class index when c has one.
func (ch *chooser) specs(c *Cluster) specs {
	if ix := ch.classes(c); ix != nil {
		return ix.clusterSpecs(c)
	}
	return clusterSpecs(c)
}

// chooseClasses makes the decision by class; ok is false when it cannot
// be made so (see above), and the caller then scores node by node. Each
// class is scored on its representative (a copy of one of its nodes'
// state, or the node itself for a unique class); the winning class's top
// node is scored again in the cluster for its GPUs, and must score the
// same, else the decision is made node by node.
func (ch *chooser) chooseClasses(c *Cluster, pf *podFit, score nodeScore) (Decision, bool) {
	if !classSafe(pf.p) || len(ch.rank) != len(c.Nodes) {
		return Decision{}, false
	}
	ix := ch.classes(c)
	if ix == nil {
		return Decision{}, false
	}
	ix.order(ch.rank, ch.rankGen)
	if ch.class.check != nil {
		ch.class.check(c, ix, pf, score)
	}
	var memo *shapeScores
	if ch.memo.on && !ch.class.noMemo {
		memo = ix.memo.slot(pf.p, ch.memo.epoch, len(ix.classes))
	}
	best := int32(-1)
	var bestScore float64
	for _, k := range ix.live {
		cl := &ix.classes[k]
		var s float64
		if memo != nil && memo.ver[k] == cl.ver {
			ch.class.remembered++
			if !memo.fits[k] {
				continue
			}
			s = memo.score[k]
		} else {
			x, xi := &ix.reps, int(k)
			if cl.unique {
				x, xi = c, int(cl.top)
			}
			var fits bool
			ch.usable, fits = pf.fit(ch.usable[:0], &x.Nodes[xi])
			if fits {
				s, _ = score(x, xi, pf.p, ch.usable)
			}
			if memo != nil {
				memo.ver[k], memo.fits[k], memo.score[k] = cl.ver, fits, s
			}
			if !fits {
				continue
			}
		}
		if math.IsNaN(s) {
			return Decision{}, false
		}
		if best < 0 || s > bestScore || (s == bestScore && cl.topRank < ix.classes[best].topRank) {
			best, bestScore = k, s
		}
	}
	if best < 0 {
		return Decision{Node: -1}, true
	}
	top := int(ix.classes[best].top)
	var fits bool
	if ch.usable, fits = pf.fit(ch.usable[:0], &c.Nodes[top]); !fits {
		return Decision{}, false
	}
	s, gpus := score(c, top, pf.p, ch.usable)
	if math.Float64bits(s) != math.Float64bits(bestScore) {
		return Decision{}, false
	}
	return Decision{Node: top, GPUs: keepGPUs(gpus)}, true
}
