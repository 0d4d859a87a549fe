package placement

// online wraps a fragmentation-driven policy so that it learns the
// typical-pod distribution only from pods that have already arrived: it
// knows nothing of the trace in advance, and rebuilds its distribution
// every refresh arrivals (and at the first ones, when it changes most).
type online struct {
	Policy
	counter    ShapeCounter
	popularity float64
	refresh    int
	seen       int
	rebuild    func(Distribution)
}

// Observe implements Observer.
func (o *online) Observe(p *Pod) {
	o.counter.Add(p)
	o.seen++
	if o.seen <= 64 || o.seen%o.refresh == 0 {
		o.rebuild(o.counter.Typical(o.popularity))
	}
}

// Name implements Policy: the wrapped policy's name with "-online".
func (o *online) Name() string { return o.Policy.Name() + "-online" }

// selfLearning is what New returns for "fgd" and "tessera" when no
// distribution is given (the scheduler and the host daemon know none in
// advance): the policy learns the typical pods from the pods it is asked to
// place, each Place call counting as one arrival. It is not an Observer, so
// callers that report arrivals cannot count a pod twice.
type selfLearning struct{ o *online }

// Name implements Policy: the wrapped policy's own name.
func (s selfLearning) Name() string { return s.o.Policy.Name() }

// Place implements Policy.
func (s selfLearning) Place(c *Cluster, p *Pod) (Decision, error) {
	s.o.Observe(p)
	return s.o.Policy.Place(c, p)
}
