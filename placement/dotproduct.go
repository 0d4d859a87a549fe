package placement

// DotProduct is the Tetris-style alignment heuristic of the study's
// DotProd baseline: the node whose free (CPU, GPU) vector, normalised by
// the largest node, has the smallest dot product with the pod's demand
// vector wins. Scores are quantised to 0..100 like a scheduler plugin's.
type DotProduct struct{ ch chooser }

// NewDotProduct returns the DotProduct policy seeded with seed.
func NewDotProduct(seed uint64) *DotProduct {
	return &DotProduct{ch: withClasses(newChooser(seed), false)}
}

// Name implements Policy.
func (*DotProduct) Name() string { return "dotproduct" }

// Place implements Policy.
func (d *DotProduct) Place(c *Cluster, p *Pod) (Decision, error) {
	sp := d.ch.specs(c)
	return d.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		cpu := float64(n.FreeCPUMilli) / float64(sp.cpuMilli) * float64(p.CPUMilli) / float64(sp.cpuMilli)
		gpu := float64(n.FreeGPUMilli()) / float64(sp.gpuMilli) * float64(p.TotalGPUMilli()) / float64(sp.gpuMilli)
		score := 1 - (cpu+gpu)/2
		return float64(int64(100 * score)), defaultGPUs(n, p, usable)
	})
}

func (x *DotProduct) chooserRef() *chooser { return &x.ch }
