package placement

import "fmt"

// choosePreferred is chooseSequential for a pod with soft constraints
// (Pod.Prefer) or one the class index cannot decide (Pod.OpensCordoned:
// cordoned nodes are one class that fits nothing): the policy's score
// decides first; among the nodes it
// scores exactly alike, the pod's preference; then the fixed tie order
// (or the draw). So the packing the policy stands for is never given up
// for a preference, and a pod without one is decided as before.
func (ch *chooser) choosePreferred(c *Cluster, pf *podFit, score nodeScore) (Decision, error) {
	p := pf.p
	pref := make([]int64, len(c.Nodes)) // no preference: all alike
	if p.Prefer != nil {
		var err error
		if pref, err = p.Prefer(c); err != nil {
			return Decision{Node: -1}, fmt.Errorf("pod %s: soft constraints: %w", p.Name, err)
		}
	}
	if len(pref) != len(c.Nodes) {
		return Decision{Node: -1}, fmt.Errorf("pod %s: soft constraints rate %d nodes of %d", p.Name, len(pref), len(c.Nodes))
	}
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
		case best.Node < 0 || s > bestScore || (s == bestScore && pref[ni] > pref[best.Node]):
			best, bestScore, ties = Decision{Node: ni, GPUs: keepGPUs(gpus)}, s, 1
		case s < bestScore || pref[ni] < pref[best.Node]:
			// s == bestScore here: a tie the preference settles for best.
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
	if best.Node < 0 {
		return Decision{Node: -1}, noFit(c, p)
	}
	return best, nil
}
