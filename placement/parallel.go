package placement

import (
	"math"
	"runtime"
	"sync/atomic"
)

// Parallel scoring. On a large cluster the chooser splits the node list
// into chunks that GOMAXPROCS goroutines take in turn (each with its own
// usable-GPU scratch); every chunk keeps its best node, and the bests are
// merged in node order by the comparison the sequential chooser makes, so
// the decision is the one chooseSequential returns, bit for bit
// (parallel_test.go compares the two on random clusters for every
// policy).
//
// The sequential chooser keeps the first feasible node, replaces it by a
// node with a strictly higher score and, on an equal score, by the node of
// lower rank. Over non-NaN scores that is: the highest score, lowest rank
// among equals, whatever the order the nodes are seen in. A NaN score
// never compares, so a NaN node wins only when it is the first feasible
// node of all; each chunk therefore also remembers its first feasible
// node.
//
// With Workers left at 0 the chooser also checks that going parallel pays
// on the machine it runs on: it keeps a moving average of the time per
// node of each way and scores the faster way, trying the other one every
// paceProbe-th decision. On a machine whose cores are all busy (other
// processes), helpers only time-share the caller's core and parallel
// scoring is slower; on idle cores it is faster. Either way the decision
// is the same, only its latency differs.
//
// Only choosers with a deterministic tie order go parallel, and only once
// that order is drawn for the cluster's size (the sequential chooser draws
// it from the seeded source the first time it meets a tie; drawing it
// earlier would change the source's later draws). Random policies, whose
// scoring draws random numbers in node order, always run sequentially.

const (
	// parallelMinNodes is the smallest cluster scored in parallel. Below
	// it a decision takes a few hundred microseconds on one goroutine,
	// and the simulator (1,213 nodes, replays already run side by side)
	// keeps one goroutine per replay (BenchmarkDecisionLatency).
	parallelMinNodes = 2048
	// parallelChunk is the smallest number of nodes one goroutine takes at
	// a time.
	parallelChunk = 256
	// paceProbe: every paceProbe-th decision that could go parallel is
	// scored the way that has been slower lately, to notice a change.
	paceProbe = 16
)

// pace is the adaptive choice between sequential and parallel scoring:
// moving averages of the nanoseconds per node of each (0: not measured).
type pace struct {
	seq, par float64
	n        int
}

// parallel reports whether the next decision should be scored in parallel.
func (p *pace) parallel() bool {
	p.n++
	switch {
	case p.par == 0:
		return true
	case p.seq == 0:
		return false
	case p.n%paceProbe == 0:
		return p.par > p.seq // the slower way
	}
	return p.par <= p.seq
}

// record folds one decision's time per node into the way it took.
func (p *pace) record(parallel bool, perNode float64) {
	avg := &p.seq
	if parallel {
		avg = &p.par
	}
	if *avg == 0 {
		*avg = perNode
	} else {
		*avg += (perNode - *avg) / 4
	}
}

// parallelScratch is what the parallel chooser reuses between decisions.
type parallelScratch struct {
	usable [][]int // one per worker
	parts  []partBest
}

// partBest is the outcome of scoring one chunk of nodes.
type partBest struct {
	// node is the best node with a non-NaN score (-1 when none), its
	// score and GPUs.
	node  int
	score float64
	gpus  []int
	// first is the chunk's first feasible node (-1 when none), its score
	// and GPUs.
	first      int
	firstScore float64
	firstGPUs  []int
}

// parallelTuning overrides the thresholds above (tests set small ones to
// exercise the parallel path on small clusters); zero fields take the
// defaults.
type parallelTuning struct {
	minNodes int
	chunk    int
	// fixed turns the adaptive choice off: always parallel when allowed.
	fixed bool
}

func (t parallelTuning) sizes() (minNodes, chunk int) {
	minNodes, chunk = parallelMinNodes, parallelChunk
	if t.minNodes > 0 {
		minNodes = t.minNodes
	}
	if t.chunk > 0 {
		chunk = t.chunk
	}
	return minNodes, chunk
}

// parallelWorkers is how many goroutines score a decision on a cluster of
// n nodes; 1 means sequential.
func (ch *chooser) parallelWorkers(n int) int {
	minNodes, chunk := ch.tuning.sizes()
	if ch.workers == 1 || ch.rank == nil || len(ch.rank) != n || n < minNodes {
		return 1
	}
	w := ch.workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return max(1, min(w, n/chunk))
}

// chooseParallel is chooseSequential on w goroutines.
func (ch *chooser) chooseParallel(c *Cluster, pf *podFit, score nodeScore, w int) Decision {
	n := len(c.Nodes)
	_, chunk := ch.tuning.sizes()
	size := max(chunk, n/(8*w)) // about eight chunks per worker
	chunks := (n + size - 1) / size
	ps := &ch.par
	if cap(ps.parts) < chunks {
		ps.parts = make([]partBest, chunks)
	}
	parts := ps.parts[:chunks]
	for len(ps.usable) < w {
		ps.usable = append(ps.usable, nil)
	}
	rank := ch.rank
	// Chunks are claimed from next; the goroutine that finishes the last
	// one closes finished. The caller scores chunks too and returns once
	// every chunk is done, without waiting for helpers that found no chunk
	// left (on a busy machine a helper may start late): such a helper
	// touches nothing but next, so it can end whenever it runs.
	var next, done atomic.Int64
	finished := make(chan struct{})
	work := func(usable *[]int) {
		for {
			k := int(next.Add(1) - 1)
			if k >= chunks {
				return
			}
			lo := k * size
			parts[k] = scanPart(c, pf, score, rank, lo, min(lo+size, n), usable)
			if done.Add(1) == int64(chunks) {
				close(finished)
			}
		}
	}
	for i := 1; i < w; i++ {
		go work(&ps.usable[i])
	}
	work(&ps.usable[0])
	<-finished

	best := Decision{Node: -1}
	var bestScore float64
	seenFirst := false
	for k := range parts {
		b := &parts[k]
		if b.first < 0 {
			continue
		}
		if !seenFirst {
			seenFirst = true
			if math.IsNaN(b.firstScore) {
				best = Decision{Node: b.first, GPUs: b.firstGPUs}
				break
			}
		}
		if b.node >= 0 && (best.Node < 0 || b.score > bestScore || (b.score == bestScore && rank[b.node] < rank[best.Node])) {
			best, bestScore = Decision{Node: b.node, GPUs: b.gpus}, b.score
		}
	}
	clear(parts) // drop the GPU lists until the next decision
	return best
}

// scanPart scores nodes [lo, hi) and returns the chunk's best and first
// feasible node.
func scanPart(c *Cluster, pf *podFit, score nodeScore, rank []int, lo, hi int, usable *[]int) partBest {
	b := partBest{node: -1, first: -1}
	for ni := lo; ni < hi; ni++ {
		var ok bool
		if *usable, ok = pf.fit((*usable)[:0], &c.Nodes[ni]); !ok {
			continue
		}
		s, gpus := score(c, ni, pf.p, *usable)
		if b.first < 0 {
			b.first, b.firstScore, b.firstGPUs = ni, s, keepGPUs(gpus)
		}
		if math.IsNaN(s) { // wins only as the first feasible node of all
			continue
		}
		if b.node < 0 || s > b.score || (s == b.score && rank[ni] < rank[b.node]) {
			b.node, b.score, b.gpus = ni, s, keepGPUs(gpus)
		}
	}
	return b
}
