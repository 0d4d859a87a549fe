package placement

// online wraps a fragmentation-driven policy so that it learns the
// typical-pod distribution only from pods that have already arrived: it
// knows nothing of the trace in advance, and rebuilds its distribution
// every refresh arrivals (and at the first ones, when it changes most).
// It learns only through Observe, which its caller calls once per
// arrival; Place never learns (a retry, a preemption probe or a read-only
// query asks where a pod would go without teaching the policy anything).
type online struct {
	Policy
	name       string
	counter    ShapeCounter
	popularity float64
	refresh    int
	seen       int
	rebuild    func(Distribution)
	// dist is the distribution last learned (TypicalOf).
	dist Distribution
}

// Observe implements Observer.
func (o *online) Observe(p *Pod) {
	o.counter.Add(p)
	o.seen++
	if o.seen <= 64 || o.seen%o.refresh == 0 {
		o.dist = o.counter.Typical(o.popularity)
		o.rebuild(o.dist)
	}
}

// Name implements Policy: the canonical name it was built by ("tessera"
// when no distribution was given, "tessera-online").
func (o *online) Name() string { return o.name }

func (o *online) chooserRef() *chooser { return chooserOf(o.Policy) }

func (o *online) typical() Distribution { return o.dist }
