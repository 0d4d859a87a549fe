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
