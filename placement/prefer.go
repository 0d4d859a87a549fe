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
	if best := ch.chooseSequential(c, pf, score, pref); best.Node >= 0 {
		return best, nil
	}
	return Decision{Node: -1}, noFit(c, p)
}
