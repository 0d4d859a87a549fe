package placement

import "math"

// FGD is Fragmentation Gradient Descent (Weng et al., ATC'23): place the
// pod where the expected fragmentation of the node against the typical-pod
// distribution grows least. A sharing pod tries every GPU that fits and
// keeps the one with the smallest growth; whole GPUs are taken from the
// lowest free positions (topology-aware when known).
//
// For fidelity with the study's simulator the score is the study's
// scheduler-plugin score, sigmoid(-growth/1000) x 100 truncated to an
// integer, and nodes with equal scores are chosen among at random; the GPU
// of a sharing pod is the first with the best integer score.
type FGD struct {
	ch   chooser
	frag *fragMeter
	dist Distribution // what frag measures against (TypicalOf)
}

// NewFGD returns FGD against the typical distribution d, seeded with seed.
func NewFGD(d Distribution, seed uint64) *FGD {
	return &FGD{ch: withClasses(newChooser(seed), false), frag: newFragMeter(d), dist: d}
}

func (g *FGD) typical() Distribution { return g.dist }

// Name implements Policy.
func (*FGD) Name() string { return "fgd" }

// Place implements Policy.
func (g *FGD) Place(c *Cluster, p *Pod) (Decision, error) {
	return g.ch.choose(c, p, g.score)
}

func (g *FGD) score(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
	n := &c.Nodes[ni]
	before := g.frag.current(n)
	if !p.Sharing() {
		gpus := defaultGPUs(n, p, usable)
		return g.quantise(before - g.frag.after(n, p, gpus)), gpus
	}
	best, bestScore := -1, 0.0
	var seen distinctFree
	for _, i := range usable {
		if !seen.first(n.GPUs[i].FreeMilli) {
			continue // same free compute, same fragmentation: keep the first
		}
		s := g.quantise(before - g.frag.after(n, p, []int{i}))
		if best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return bestScore, []int{best}
}

func (g *FGD) quantise(delta float64) float64 {
	return math.Trunc(100 / (1 + math.Exp(-delta/1000)))
}

func (x *FGD) chooserRef() *chooser { return &x.ch }
