package placement

// Random places a pod on a feasible node chosen uniformly at random, and a
// sharing pod on a random GPU that fits (the study's Random baseline).
type Random struct{ ch chooser }

// NewRandom returns the Random policy seeded with seed.
func NewRandom(seed uint64) *Random { return &Random{ch: newUniformChooser(seed)} }

// Name implements Policy.
func (*Random) Name() string { return "random" }

// Place implements Policy.
func (r *Random) Place(c *Cluster, p *Pod) (Decision, error) {
	return r.ch.choose(c, p, func(c *Cluster, ni int, p *Pod, usable []int) (float64, []int) {
		n := &c.Nodes[ni]
		if p.Sharing() {
			return 0, []int{usable[r.ch.rng.IntN(len(usable))]}
		}
		return 0, defaultGPUs(n, p, usable)
	})
}

func (x *Random) chooserRef() *chooser { return &x.ch }
