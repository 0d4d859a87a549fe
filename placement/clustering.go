package placement

// GpuClustering groups pods of the same GPU shape on the same nodes (the
// study's GpuClustering baseline): a node that already holds only pods of
// the arriving shape scores highest, then nodes holding that shape among
// others, then idle nodes, then nodes holding other shapes; within each
// band fuller nodes score higher. CPU-only pods score 0 everywhere.
type GpuClustering struct{ ch chooser }

// NewGpuClustering returns the GpuClustering policy seeded with seed.
func NewGpuClustering(seed uint64) *GpuClustering {
	return &GpuClustering{ch: withClasses(newChooser(seed), true)}
}

// Name implements Policy.
func (*GpuClustering) Name() string { return "gpuclustering" }

// Place implements Policy.
func (g *GpuClustering) Place(c *Cluster, p *Pod) (Decision, error) {
	sp := g.ch.specs(c)
	return g.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		if p.GPUCount() == 0 {
			return 0, nil
		}
		fill := 25 * (sp.gpuMilli - n.FreeGPUMilli()) / sp.gpuMilli
		var band int64
		switch _, same := n.Shapes[p.shape()]; {
		case same && len(n.Shapes) == 1:
			band = 75
		case same:
			band = 50
		case len(n.Shapes) == 0:
			band = 25
		}
		return float64(band + fill), defaultGPUs(n, p, usable)
	})
}

func (x *GpuClustering) chooserRef() *chooser { return &x.ch }
