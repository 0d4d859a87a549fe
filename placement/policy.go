package placement

import (
	"math/rand/v2"
	"time"
)

// Policy chooses a node and GPU(s) for a pod on a snapshot. Place must not
// change the snapshot; the caller applies the decision with Cluster.Apply.
// A Policy value may keep private caches and a seeded random source, so one
// value serves one goroutine; build one per replay or per scheduler worker.
// It returns a *NoFitError (which wraps ErrNoFit) when no node can take
// the pod.
type Policy interface {
	Name() string
	Place(c *Cluster, p *Pod) (Decision, error)
}

// Observer is implemented by policies that learn the workload online: the
// caller reports each arriving pod before asking where it goes.
type Observer interface {
	Observe(p *Pod)
}

// nodeScore scores one feasible node for p (higher is better) and names
// the GPUs the pod would take there. usable lists the GPUs that can take
// one GPU's worth of the pod.
//
// A chooser made by newChooser calls its nodeScore from several goroutines
// at once on large clusters (see parallel.go): a scoring function must
// only read the snapshot and its policy's settings, and keep its caches in
// something safe for concurrent use (the fragMeter is). The result must
// depend only on the node and the pod, never on which nodes were scored
// before. A policy whose scoring draws random numbers uses
// newUniformChooser, which always scores in order on one goroutine.
//
// The GPU list may be a piece of usable (so that scoring a node allocates
// nothing): it is good until the caller's next use of usable, and a
// chooser that keeps it longer copies it (keepGPUs).

type nodeScore func(c *Cluster, ni int, p *Pod, usable []int) (score float64, gpus []int)

// chooser runs feasibility over all nodes, scores the feasible ones and
// keeps the best. Exact ties go to the node that comes first in a fixed
// order of the nodes drawn from the seed (so ties are broken the same way
// pod after pod, which packs; this is what reproduces the FGD study's
// published numbers), or, for a chooser made by newUniformChooser,
// uniformly at random (reservoir sampling). A chooser made withClasses scores
// each class of nodes in one state once where it may (classchoose.go),
// with the same result.
type chooser struct {
	rng    *rand.Rand
	usable []int
	// rank, when set, breaks ties deterministically: the node with the
	// lowest rank wins (a fixed, seeded order of nodes).
	rank []int
	// workers caps the goroutines that score one decision: 0 means
	// GOMAXPROCS when that is measured to pay (see pace), 1 always scores
	// on the calling goroutine, more always scores on that many.
	workers int
	tuning  parallelTuning
	pace    pace
	par     parallelScratch
	// mig places MIG requests; nil is first fit.
	mig migPlanner
	// migMemo remembers what each node offers MIG requests (migcache.go).
	migMemo migNodeMemo
	// rankGen counts the tie orders drawn (ranked draws a new one when
	// the cluster's size changes).
	rankGen uint64
	// class says whether the chooser scores by class (classchoose.go);
	// cache holds its class indexes.
	class classSettings
	cache classCache
	// memo is set by the policy before a decision whose scores depend
	// only on the class, the pod and an epoch (classmemo.go); choose
	// clears it.
	memo memoKey
	// classDecisions counts the decisions made by class (tests read it).
	classDecisions int
}

func newChooser(seed uint64) chooser {
	return chooser{rng: rand.New(rand.NewPCG(seed, 0x7e55e7a)), rank: []int{}}
}

func newUniformChooser(seed uint64) chooser {
	return chooser{rng: rand.New(rand.NewPCG(seed, 0x7e55e7a))}
}

func (ch *chooser) choose(c *Cluster, p *Pod, score nodeScore) (Decision, error) {
	d, err := ch.decide(c, p, score)
	ch.cache.decisions++
	ch.memo = memoKey{}
	return d, err
}

// decide is choose without the count of decisions.
func (ch *chooser) decide(c *Cluster, p *Pod, score nodeScore) (Decision, error) {
	if p.MIG() {
		return ch.chooseMIG(c, p, ch.mig)
	}
	pf := newPodFit(p)
	if p.Prefer != nil || p.OpensCordoned {
		return ch.choosePreferred(c, &pf, score)
	}
	best, classes := ch.chooseClasses(c, &pf, score)
	w := ch.parallelWorkers(len(c.Nodes))
	switch {
	case classes:
		ch.classDecisions++
	case w <= 1:
		best = ch.chooseSequential(c, &pf, score, nil)
	case ch.workers > 1 || ch.tuning.fixed:
		best = ch.chooseParallel(c, &pf, score, w)
	default: // measure which way pays
		par := ch.pace.parallel()
		start := time.Now()
		if par {
			best = ch.chooseParallel(c, &pf, score, w)
		} else {
			best = ch.chooseSequential(c, &pf, score, nil)
		}
		ch.pace.record(par, float64(time.Since(start))/float64(len(c.Nodes)))
	}
	if best.Node < 0 {
		return Decision{Node: -1}, noFit(c, p)
	}
	return best, nil
}

// chooseSequential scores the nodes in order on the calling goroutine; it
// is the reference the parallel path must match.
func (ch *chooser) chooseSequential(c *Cluster, pf *podFit, score nodeScore, pref []int64) Decision {
	p := pf.p
	best := Decision{Node: -1}
	var bestScore float64
	ties := 0
	for ni := range c.Nodes {
		var ok bool
		if ch.usable, ok = pf.fit(ch.usable[:0], &c.Nodes[ni]); !ok {
			continue
		}
		s, gpus := score(c, ni, p, ch.usable)
		switch {
		case best.Node < 0 || s > bestScore || (s == bestScore && pref != nil && pref[ni] > pref[best.Node]):
			best, bestScore, ties = Decision{Node: ni, GPUs: keepGPUs(gpus)}, s, 1
		case s != bestScore || (pref != nil && pref[ni] < pref[best.Node]):
			// lower (or NaN: never a tie), or a tie the preference settles for best

		case ch.rank != nil:
			if ch.ranked(c, ni) < ch.ranked(c, best.Node) {
				best = Decision{Node: ni, GPUs: keepGPUs(gpus)}
			}
		default:
			ties++
			if ch.rng.IntN(ties) == 0 {
				best = Decision{Node: ni, GPUs: keepGPUs(gpus)}
			}
		}
	}
	return best
}

// keepGPUs copies a node score's GPU list, which may be a piece of the
// chooser's usable list, for a decision kept past the next node.
func keepGPUs(gpus []int) []int {
	if gpus == nil {
		return nil
	}
	return append(make([]int, 0, len(gpus)), gpus...)
}

// noFit is the error for a pod no node can take, naming the first node's
// reason (every node rejected the pod, the first one included).
func noFit(c *Cluster, p *Pod) error {
	e := &NoFitError{Pod: p.Name}
	if len(c.Nodes) > 0 {
		e.First, _ = Explain(&c.Nodes[0], p)
		e.First.Node = c.Nodes[0].Name
	}
	return e
}

func (ch *chooser) ranked(c *Cluster, ni int) int {
	if len(ch.rank) != len(c.Nodes) {
		ch.rank = ch.rng.Perm(len(c.Nodes))
		ch.rankGen++
	}
	return ch.rank[ni]
}
