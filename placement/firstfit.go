package placement

// FirstFit is a scheduler that places every pod first fit: the first node
// in the cluster's order that can take it, on its first GPUs that can
// (lowest positions), and a MIG request on the first GPU with a free
// instance of its profile or, on a managed GPU, at the lowest free start
// (as Options.MIGFirstFit does for the default policy's MIG requests).
//
// It is the baseline scheduler of the MIG experiment (tracesim, "MIG:
// what isolation costs"): there the first-fit, static-layout and
// template-matching setups place their CPU-only pods with it, so that every
// pod of a setup goes in one node order. (Placed in another order, by a
// policy that packs them on its own seeded order, the CPU-only pods fill
// the CPU of nodes whose GPUs the first-fit MIG requests have not reached,
// and strand those GPUs.) It is not in the registry: New does not build it.
type FirstFit struct {
	usable []int
	// ch places MIG requests (no tie order: the first feasible node wins)
	// and remembers what each node offers them.
	ch chooser
}

// NewFirstFit returns the first-fit scheduler.
func NewFirstFit() *FirstFit { return &FirstFit{} }

// Name implements Policy.
func (*FirstFit) Name() string { return "firstfit" }

// Place implements Policy.
func (f *FirstFit) Place(c *Cluster, p *Pod) (Decision, error) {
	if p.MIG() {
		return f.ch.chooseMIG(c, p, firstFit{})
	}
	for ni := range c.Nodes {
		n := &c.Nodes[ni]
		if !feasible(n, p) {
			continue
		}
		f.usable = usableGPUs(f.usable[:0], n, p)
		want := p.GPUCount()
		if len(f.usable) < want {
			continue // feasible says it has them; kept for safety
		}
		if want == 0 {
			return Decision{Node: ni}, nil
		}
		return Decision{Node: ni, GPUs: keepGPUs(f.usable[:want])}, nil
	}
	return Decision{Node: -1}, noFit(c, p)
}
