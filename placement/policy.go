package placement

import (
	"fmt"
	"math/rand/v2"
)

// Policy chooses a node and GPU(s) for a pod on a snapshot. Place must not
// change the snapshot; the caller applies the decision with Cluster.Apply.
// A Policy value may keep private caches and a seeded random source, so one
// value serves one goroutine; build one per replay or per scheduler worker.
// It returns an error wrapping ErrNoFit when no node can take the pod.
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
type nodeScore func(c *Cluster, ni int, p *Pod, usable []int) (score float64, gpus []int)

// chooser runs feasibility over all nodes, scores the feasible ones and
// keeps the best. Exact ties go to the node that comes first in a fixed
// order of the nodes drawn from the seed (so ties are broken the same way
// pod after pod, which packs; this is what reproduces the FGD study's
// published numbers), or, for a chooser made by newUniformChooser,
// uniformly at random (reservoir sampling).
type chooser struct {
	rng    *rand.Rand
	usable []int
	// rank, when set, breaks ties deterministically: the node with the
	// lowest rank wins (a fixed, seeded order of nodes).
	rank []int
}

func newChooser(seed uint64) chooser {
	return chooser{rng: rand.New(rand.NewPCG(seed, 0x7e55e7a)), rank: []int{}}
}

func newUniformChooser(seed uint64) chooser {
	return chooser{rng: rand.New(rand.NewPCG(seed, 0x7e55e7a))}
}

func (ch *chooser) choose(c *Cluster, p *Pod, score nodeScore) (Decision, error) {
	best := Decision{Node: -1}
	var bestScore float64
	ties := 0
	firstReason := ""
	for ni := range c.Nodes {
		n := &c.Nodes[ni]
		if !feasible(n, p) {
			if firstReason == "" {
				_, reason := Feasible(n, p)
				firstReason = n.Name + ": " + reason
			}
			continue
		}
		ch.usable = usableGPUs(ch.usable[:0], n, p)
		s, gpus := score(c, ni, p, ch.usable)
		switch {
		case best.Node < 0 || s > bestScore:
			best, bestScore, ties = Decision{Node: ni, GPUs: gpus}, s, 1
		case s == bestScore && ch.rank != nil:
			if ch.ranked(c, ni) < ch.ranked(c, best.Node) {
				best = Decision{Node: ni, GPUs: gpus}
			}
		case s == bestScore:
			ties++
			if ch.rng.IntN(ties) == 0 {
				best = Decision{Node: ni, GPUs: gpus}
			}
		}
	}
	if best.Node < 0 {
		if firstReason == "" {
			firstReason = "cluster has no nodes"
		}
		return Decision{Node: -1}, fmt.Errorf("pod %s: %w (first rejection: %s)", p.Name, ErrNoFit, firstReason)
	}
	return best, nil
}

func (ch *chooser) ranked(c *Cluster, ni int) int {
	if len(ch.rank) != len(c.Nodes) {
		ch.rank = ch.rng.Perm(len(c.Nodes))
	}
	return ch.rank[ni]
}
