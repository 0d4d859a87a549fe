package placement

import "unsafe"

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
// are common). It is safe for concurrent use: the goroutines that score
// parts of a large cluster share one meter (see parallel.go).
type fragMeter struct {
	dist   Distribution
	models modelTable
	memo   fragMemo
}

const memoGPUs = 8
const memoLimit = 1 << 21

// memoMaxFree is the largest free compute a memo key holds (ten bits);
// states outside [0, memoMaxFree] are computed without the memo.
const memoMaxFree = 1<<10 - 1

func newFragMeter(d Distribution) *fragMeter {
	d, _ = d.split() // MIG requests are placed by slots, not fragments (mig.go)
	return &fragMeter{dist: d}
}

// access returns, for each typical shape, whether it may run on model.
func (f *fragMeter) access(model string) []bool {
	_, a := f.models.lookup(model, f.buildAccess)
	return a
}

func (f *fragMeter) buildAccess(model string) []bool {
	a := make([]bool, len(f.dist))
	for i, t := range f.dist {
		a[i] = t.Shape.allows(model)
	}
	return a
}

// sameString is a == b, answered without a call when both share their
// bytes (the GPUs of a node usually share one model string).
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// makeKey builds the memo key of a homogeneous state; false when the
// state does not fit a key (more than memoGPUs GPUs, a free value outside
// [0, memoMaxFree], no model id). The key holds the multiset of free
// values: the first len(free) sorted (the GPU count tells the zeros after
// them apart).
func makeKey(id int, cpu int64, free []int64) (fragKey, bool) {
	if id < 0 || len(free) > memoGPUs {
		return fragKey{}, false
	}
	var all uint64 // every value or'ed: one range check (negatives wrap)
	var s [memoGPUs]uint64
	for i, v := range free {
		s[i] = uint64(v)
		all |= s[i]
	}
	if all > memoMaxFree {
		return fragKey{}, false
	}
	var lo, hi uint64
	if len(free) == 8 {
		lo, hi = sorted8(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	} else {
		sortFirst(&s, len(free))
		lo = s[0] | s[1]<<10 | s[2]<<20 | s[3]<<30 | s[4]<<40 | s[5]<<50
		hi = s[6] | s[7]<<10
	}
	return fragKey{lo: lo, hi: hi | uint64(len(free))<<20 | uint64(id)<<24, cpu: cpu}, true
}

// sorted8 sorts eight values with an optimal 19-comparator network, on
// locals (registers), and packs them ten bits each: values 0-5 in lo,
// 6-7 in hi.
func sorted8(a0, a1, a2, a3, a4, a5, a6, a7 uint64) (lo, hi uint64) {
	a0, a2 = min(a0, a2), max(a0, a2)
	a1, a3 = min(a1, a3), max(a1, a3)
	a4, a6 = min(a4, a6), max(a4, a6)
	a5, a7 = min(a5, a7), max(a5, a7)
	a0, a4 = min(a0, a4), max(a0, a4)
	a1, a5 = min(a1, a5), max(a1, a5)
	a2, a6 = min(a2, a6), max(a2, a6)
	a3, a7 = min(a3, a7), max(a3, a7)
	a0, a1 = min(a0, a1), max(a0, a1)
	a2, a3 = min(a2, a3), max(a2, a3)
	a4, a5 = min(a4, a5), max(a4, a5)
	a6, a7 = min(a6, a7), max(a6, a7)
	a2, a4 = min(a2, a4), max(a2, a4)
	a3, a5 = min(a3, a5), max(a3, a5)
	a1, a4 = min(a1, a4), max(a1, a4)
	a3, a6 = min(a3, a6), max(a3, a6)
	a1, a2 = min(a1, a2), max(a1, a2)
	a3, a4 = min(a3, a4), max(a3, a4)
	a5, a6 = min(a5, a6), max(a5, a6)
	return a0 | a1<<10 | a2<<20 | a3<<30 | a4<<40 | a5<<50, a6 | a7<<10
}

// sortFirst sorts s[:n]: by branch-free sorting networks for 2 and 4
// values, by insertion otherwise.
func sortFirst(s *[memoGPUs]uint64, n int) {
	cx := func(i, j int) { s[i], s[j] = min(s[i], s[j]), max(s[i], s[j]) }
	switch n {
	case 0, 1:
	case 2:
		cx(0, 1)
	case 4:
		cx(0, 1)
		cx(2, 3)
		cx(0, 2)
		cx(1, 3)
		cx(1, 2)
	default:
		for i := 1; i < n; i++ {
			for j := i; j > 0 && s[j-1] > s[j]; j-- {
				s[j-1], s[j] = s[j], s[j-1]
			}
		}
	}
}

// state returns F_n for node n with cpu free CPU and free[i] compute free
// on GPU i (free may differ from the node's present state: it is how
// policies look at a hypothetical placement), given whether all of n's
// GPUs are of one model, and that model.
func (f *fragMeter) state(n *Node, cpu int64, free []int64, model string, homo bool) float64 {
	var total int64
	for _, v := range free {
		total += v
	}
	if total == 0 {
		return 0 // nothing free, nothing lost (what compute returns)
	}
	if !homo || len(free) > memoGPUs {
		return f.computeWith(n, nil, false, cpu, free, total)
	}
	id, acc := f.models.lookup(model, f.buildAccess)
	k, ok := makeKey(id, cpu, free)
	if !ok {
		return f.computeWith(n, acc, true, cpu, free, total)
	}
	if v, ok := f.memo.get(&k); ok {
		return v
	}
	v := f.computeWith(n, acc, true, cpu, free, total)
	f.memo.put(&k, v)
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
	return f.computeWith(n, acc, homo, cpu, free, total)
}

// computeWith is compute given the access list of a homogeneous node's
// model and the total free compute (> 0).
func (f *fragMeter) computeWith(n *Node, acc []bool, homo bool, cpu int64, free []int64, total int64) float64 {
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
	return f.taking(n, hostCPU(n, 0), nil, 0)
}

// taking is F_n for n with cpu free CPU once take compute is taken on each
// GPU at the positions gpus. It reads each GPU once (free compute and
// model together).
func (f *fragMeter) taking(n *Node, cpu int64, gpus []int, take int64) float64 {
	gs := n.GPUs
	var buf [2 * memoGPUs]int64
	var free []int64
	if len(gs) <= len(buf) {
		free = buf[:len(gs)]
	} else {
		free = make([]int64, len(gs))
	}
	var model string
	homo := true
	if len(gs) > 0 {
		model = gs[0].Model
	}
	for i := range gs {
		free[i] = gs[i].FreeMilli
		if !sameString(gs[i].Model, model) {
			homo = false
		}
	}
	for _, i := range gpus {
		free[i] -= take
	}
	if len(free) > memoGPUs {
		return f.compute(n, "", false, cpu, free)
	}
	return f.state(n, cpu, free, model, homo)
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
	return f.taking(n, hostCPU(n, p.CPUMilli), gpus, p.MilliPerGPU())
}

// ClusterFragmentation returns the cluster's expected fragmentation (GPU
// milli, summed over nodes) against d.
func ClusterFragmentation(c *Cluster, d Distribution) float64 {
	return NewFragMeter(d).Cluster(c)
}

// FragMeter measures cluster fragmentation repeatedly against one
// distribution, reusing its memo between calls. It is safe for concurrent
// use.
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
