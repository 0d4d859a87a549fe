package placement

import "slices"

// Fragmentation, after Weng et al. (ATC'23, "Beware of Fragmentation"):
// for a node n and a task shape m, F_n(m) is the free GPU compute on n that
// m cannot use. If m cannot run on n at all (model not allowed, too little
// CPU, too few GPUs with enough free), all of n's free GPU compute is
// fragment; otherwise the fragment is the free compute on GPUs with less
// free than m needs per GPU. A CPU-only shape counts all free GPU compute
// (as the study's code does; it shifts every node's score equally). The
// node's fragmentation is the expectation over the typical distribution:
// F_n = sum_m p_m F_n(m).

// fragMeter computes expected fragmentation for node states against one
// distribution, memoising by state (identical nodes in identical states
// are common). A fragMeter belongs to one goroutine.
type fragMeter struct {
	dist    Distribution
	allowed map[string][]bool // model label -> per-shape access
	memo    map[fragKey]float64
	scratch []int64
}

const memoGPUs = 8
const memoLimit = 1 << 21

type fragKey struct {
	model string
	cpu   int64
	n     int
	free  [memoGPUs]int16
}

func newFragMeter(d Distribution) *fragMeter {
	return &fragMeter{dist: d, allowed: map[string][]bool{}, memo: map[fragKey]float64{}}
}

func (f *fragMeter) access(model string) []bool {
	a, ok := f.allowed[model]
	if !ok {
		a = make([]bool, len(f.dist))
		for i, t := range f.dist {
			a[i] = t.Shape.allows(model)
		}
		f.allowed[model] = a
	}
	return a
}

// homogeneous returns the node's single GPU model, or false.
func homogeneous(n *Node) (string, bool) {
	if len(n.GPUs) == 0 {
		return "", true
	}
	m := n.GPUs[0].Model
	for i := range n.GPUs {
		if n.GPUs[i].Model != m {
			return "", false
		}
	}
	return m, true
}

// node returns F_n for node n with cpu free CPU and free[i] compute free
// on GPU i (free may differ from the node's present state: it is how
// policies look at a hypothetical placement).
func (f *fragMeter) node(n *Node, cpu int64, free []int64) float64 {
	model, homo := homogeneous(n)
	if !homo || len(free) > memoGPUs {
		return f.compute(n, "", false, cpu, free)
	}
	k := fragKey{model: model, cpu: cpu, n: len(free)}
	for i, v := range free {
		k.free[i] = int16(v)
	}
	slices.Sort(k.free[:len(free)])
	if v, ok := f.memo[k]; ok {
		return v
	}
	v := f.compute(n, model, true, cpu, free)
	if len(f.memo) >= memoLimit {
		clear(f.memo)
	}
	f.memo[k] = v
	return v
}

func (f *fragMeter) compute(n *Node, model string, homo bool, cpu int64, free []int64) float64 {
	var total int64
	for _, v := range free {
		total += v
	}
	if total == 0 {
		return 0
	}
	var acc []bool
	if homo {
		acc = f.access(model)
	}
	var frag float64
	for ti, t := range f.dist {
		s := t.Shape
		if s.GPUCount == 0 {
			frag += t.Weight * float64(total)
			continue
		}
		if homo && !acc[ti] {
			frag += t.Weight * float64(total)
			continue
		}
		fit := 0
		var lost int64
		for i, v := range free {
			if !homo && !s.allows(n.GPUs[i].Model) {
				lost += v
				continue
			}
			if v >= s.GPUMilli {
				fit++
			} else {
				lost += v
			}
		}
		if fit >= s.GPUCount && cpu >= s.CPUMilli {
			frag += t.Weight * float64(lost)
		} else {
			frag += t.Weight * float64(total)
		}
	}
	return frag
}

// current is F_n for the node as it is.
func (f *fragMeter) current(n *Node) float64 {
	f.scratch = f.scratch[:0]
	for i := range n.GPUs {
		f.scratch = append(f.scratch, n.GPUs[i].FreeMilli)
	}
	return f.node(n, hostCPU(n, 0), f.scratch)
}

// hostCPU is n's free CPU after taking take; untracked CPU never limits.
func hostCPU(n *Node, take int64) int64 {
	if n.CPUMilli == 0 {
		return 1 << 40
	}
	return n.FreeCPUMilli - take
}

// after is F_n once p has taken gpus (positions) on n.
func (f *fragMeter) after(n *Node, p *Pod, gpus []int) float64 {
	f.scratch = f.scratch[:0]
	for i := range n.GPUs {
		f.scratch = append(f.scratch, n.GPUs[i].FreeMilli)
	}
	for _, i := range gpus {
		f.scratch[i] -= p.MilliPerGPU()
	}
	return f.node(n, hostCPU(n, p.CPUMilli), f.scratch)
}

// ClusterFragmentation returns the cluster's expected fragmentation (GPU
// milli, summed over nodes) against d.
func ClusterFragmentation(c *Cluster, d Distribution) float64 {
	return NewFragMeter(d).Cluster(c)
}

// FragMeter measures cluster fragmentation repeatedly against one
// distribution, reusing its memo between calls. Not for concurrent use.
type FragMeter struct{ m *fragMeter }

// NewFragMeter returns a meter for distribution d.
func NewFragMeter(d Distribution) *FragMeter { return &FragMeter{m: newFragMeter(d)} }

// Cluster returns the cluster's expected fragmentation in GPU milli.
func (f *FragMeter) Cluster(c *Cluster) float64 {
	var s float64
	for i := range c.Nodes {
		s += f.m.current(&c.Nodes[i])
	}
	return s
}
