package placement

import "github.com/tessera-gpu/tessera/request"

// GpuPacking is the study's GpuPacking baseline: prefer GPUs already
// shared, then free GPUs on nodes already in use, then idle nodes (fewer
// GPUs first). Scores are the study's integer bands.
type GpuPacking struct{ ch chooser }

// NewGpuPacking returns the GpuPacking policy seeded with seed.
func NewGpuPacking(seed uint64) *GpuPacking {
	return &GpuPacking{ch: withClasses(newChooser(seed), false)}
}

// Name implements Policy.
func (*GpuPacking) Name() string { return "gpupacking" }

// Place implements Policy.
func (g *GpuPacking) Place(c *Cluster, p *Pod) (Decision, error) {
	return g.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		gpus := defaultGPUs(n, p, usable)
		if p.GPUCount() == 0 {
			return 0, nil
		}
		free := n.FullyFreeGPUs()
		if free == len(n.GPUs) { // idle node
			return float64(max(100/3-int64(free), int64(free))), gpus
		}
		wholeUsed := 0
		var leftOnUsed int64
		for _, i := range gpus {
			if n.GPUs[i].FreeMilli == request.Whole {
				wholeUsed++
			}
			leftOnUsed += n.GPUs[i].FreeMilli * 100 / request.Whole
		}
		if wholeUsed > 0 { // free GPUs on a used node
			return float64(max(100/2-int64(wholeUsed), 100/3)), gpus
		}
		return float64(max(100-leftOnUsed/10, 100/2)), gpus // shared GPUs
	})
}

func (x *GpuPacking) chooserRef() *chooser { return &x.ch }
