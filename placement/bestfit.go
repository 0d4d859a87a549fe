package placement

// BestFit is the study's BestFit baseline: the node left with the least
// free CPU and GPU (each normalised by the largest node, equal weights)
// after placing the pod wins.
type BestFit struct{ ch chooser }

// NewBestFit returns the BestFit policy seeded with seed.
func NewBestFit(seed uint64) *BestFit { return &BestFit{ch: withClasses(newChooser(seed), false)} }

// Name implements Policy.
func (*BestFit) Name() string { return "bestfit" }

// Place implements Policy.
func (b *BestFit) Place(c *Cluster, p *Pod) (Decision, error) {
	sp := b.ch.specs(c)
	return b.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		left := 0.5*float64(n.FreeCPUMilli-p.CPUMilli)/float64(sp.cpuMilli) +
			0.5*float64(n.FreeGPUMilli()-p.TotalGPUMilli())/float64(sp.gpuMilli)
		return float64(int64(100 * (1 - left))), defaultGPUs(n, p, usable)
	})
}

func (x *BestFit) chooserRef() *chooser { return &x.ch }
