package placement

import "github.com/tessera-gpu/tessera/request"

// unit is one feasibility check: ok is the fast test run on every node;
// why explains a failure and runs only when a reason is wanted.
type unit struct {
	ok  func(n *Node, p *Pod) bool
	why func(n *Node, p *Pod) string
}

// units are the feasibility units in the order they run; the first
// failing unit names the reason. (An array value: nothing package-level
// can be changed.)
func units() [6]unit {
	return [...]unit{
		{okOpen, whyOpen},
		{okMIG, whyMIG},
		{okCPU, whyCPU},
		{okMemory, whyMemory},
		{okPods, whyPods},
		{okGPUs, whyGPUs},
	}
}

// Feasible reports whether node n can take pod p now, and if not, why
// (Explain gives the figures too).
func Feasible(n *Node, p *Pod) (ok bool, reason string) {
	r, ok := Explain(n, p)
	return ok, r.Reason
}

// Fits is Feasible without the reason (nothing is formatted: cheap
// enough to ask of every node).
func Fits(n *Node, p *Pod) bool { return feasible(n, p) }

// feasible is Feasible without the reason.
func feasible(n *Node, p *Pod) bool {
	for _, u := range units() {
		if !u.ok(n, p) {
			return false
		}
	}
	return true
}

// usableGPUs appends to dst the positions of n's GPUs that can each take
// one GPU's worth of p (model allowed, enough compute and memory free).
func usableGPUs(dst []int, n *Node, p *Pod) []int {
	if p.MIG() {
		return migUsable(dst, n, p)
	}
	for i := range n.GPUs {
		if gpuOK(p, &n.GPUs[i]) {
			dst = append(dst, i)
		}
	}
	return dst
}

// podFit is the chooser's feasibility check for one pod, with what does
// not depend on the node worked out once per decision: fit gives the same
// answer as feasible and the same list as usableGPUs, in one pass over
// the GPUs and without calls through the unit table. (feasible_test.go
// checks the two agree.)
type podFit struct {
	p     *Pod
	mig   bool  // a MIG request (okMIG decides; see mig.go)
	want  int   // GPUs wanted
	milli int64 // compute per GPU, when fixed
	// fixedMilli: milliOn is milli on every GPU (not a memory-only share).
	fixedMilli bool
	anyModel   bool
}

func newPodFit(p *Pod) podFit {
	m := p.MilliPerGPU()
	return podFit{
		p:          p,
		mig:        p.MIG(),
		want:       p.GPUCount(),
		milli:      m,
		fixedMilli: !(m == 0 && p.GPU.Count > 0 && p.GPU.MemoryMiB > 0),
		anyModel:   len(p.GPU.Models) == 0,
	}
}

// gpuOK is gpuOK(f.p, g).
func (f *podFit) gpuOK(g *GPU) bool {
	if g.MIG != nil {
		return false
	}
	milli := f.milli
	if !f.fixedMilli {
		milli = f.p.milliOn(g)
	}
	if g.FreeMilli < milli || (milli >= request.Whole && g.FreeMilli < request.Whole) {
		return false
	}
	if !f.anyModel && !modelAllowed(f.p, g.Model) {
		return false
	}
	return g.MemoryMiB == 0 || f.p.memoryOn(g) <= g.FreeMemoryMiB
}

// fit reports feasible(n, f.p) and, when true, appends usableGPUs(n, f.p)
// to dst.
func (f *podFit) fit(dst []int, n *Node) ([]int, bool) {
	p := f.p
	if !okOpen(n, p) {
		return dst, false
	}
	if f.mig {
		if !okCPU(n, p) || !okMemory(n, p) || !okPods(n, p) || !okMIG(n, p) {
			return dst, false
		}
		return migUsable(dst, n, p), true
	}
	if !okCPU(n, p) || !okMemory(n, p) || !okPods(n, p) || len(n.GPUs) < f.want {
		return dst, false
	}
	base := len(dst)
	if f.fixedMilli { // gpuOK, inlined
		milli, whole := f.milli, f.milli >= request.Whole
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if g.MIG != nil || g.FreeMilli < milli || (whole && g.FreeMilli < request.Whole) ||
				(!f.anyModel && !modelAllowed(p, g.Model)) ||
				(g.MemoryMiB != 0 && p.memoryOn(g) > g.FreeMemoryMiB) {
				continue
			}
			dst = append(dst, i)
		}
	} else {
		for i := range n.GPUs {
			if f.gpuOK(&n.GPUs[i]) {
				dst = append(dst, i)
			}
		}
	}
	if len(dst)-base < f.want {
		return dst[:base], false
	}
	return dst, true
}
