package placement

// Spread is the opposite of packing: the node with the most free GPU
// compute (then CPU) wins, and a sharing pod goes to the emptiest GPU. It
// suits latency-sensitive work that should not share; it fragments a
// cluster quickly.
type Spread struct{ ch chooser }

// NewSpread returns the Spread policy seeded with seed.
func NewSpread(seed uint64) *Spread { return &Spread{ch: withClasses(newChooser(seed), false)} }

// Name implements Policy.
func (*Spread) Name() string { return "spread" }

// Place implements Policy.
func (s *Spread) Place(c *Cluster, p *Pod) (Decision, error) {
	sp := s.ch.specs(c)
	return s.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		score := float64(n.FreeGPUMilli())/float64(sp.gpuMilli) + 1e-3*float64(n.FreeCPUMilli)/float64(sp.cpuMilli)
		if p.Sharing() {
			best := usable[0]
			for _, i := range usable {
				if n.GPUs[i].FreeMilli > n.GPUs[best].FreeMilli {
					best = i
				}
			}
			return score, []int{best}
		}
		return score, defaultGPUs(n, p, usable)
	})
}

func (x *Spread) chooserRef() *chooser { return &x.ch }
