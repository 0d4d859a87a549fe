package placement

import (
	"math"
	"sort"
)

// Stranding: GPU compute is only usable with the host CPU and memory to
// feed it. Tessera counts the free GPU compute that a node's free CPU (or
// memory) can no longer feed and minimises its growth, so CPU-only and
// CPU-heavy pods do not drain the CPU of nodes whose GPUs will later need
// it (at the end of an FGD replay of the default openb trace 1.8% of GPU
// capacity sits free on nodes with under 4 CPUs left).
//
// How much a GPU milli needs depends on the pod that will take it, and
// the typical GPU pods differ widely (on openb, a fifth of the GPU is
// asked with over 16 CPUs per GPU, another fifth with under 4). Which
// figure to feed with depends on whether the workload is host-bound:
//
//   - When the cluster has more CPU and more memory per GPU than the
//     workload asks (CPU-only pods included), the pods that need much
//     find nodes that have much, so a node only has to keep what the mean
//     typical GPU pod asks per GPU milli: stranded = max(0, g - c/r̄).
//   - When the workload asks more of either than the cluster has, pods
//     are turned away by host resources and every node ends close to its
//     host limits, so which pods can still use a node's free GPU depends
//     on each pod's own needs, not the mean: the stranded compute is the
//     expectation over the typical GPU pods (weighted by the GPU they ask)
//     of max(0, g - c/r), r each pod's own need per GPU milli, for CPU
//     and for memory alike. Unlike the mean's it charges a node as soon as
//     its CPU (memory) per free GPU falls below what the heavy pods ask (so
//     nodes that can still take them are kept for them, and CPU-only pods
//     go to nodes whose GPUs are taken or whose CPU is plentiful), and
//     charges less where the light pods can still use the GPU.
//
// The boundary (demand equal to supply) is not tuned: below it, the mean
// is what the shared traces were measured with (their results do not
// move); above it, on CPU-heavy variants of openb, the mean lost up to 3
// points of allocation to FGD and the expectation gains 0.8 to 4.9 over
// FGD (see docs/simulator.md, "When CPU is scarce").

// hostNeed is what the typical GPU pods of a distribution ask of one host
// resource (CPU milli or memory MiB) per GPU milli, and what the whole
// distribution asks.
type hostNeed struct {
	// mean is the GPU-weighted mean need per GPU milli (0: none asked).
	mean float64
	// demand is the resource the whole distribution, CPU-only pods too,
	// asks per GPU milli it asks.
	demand float64
	// ratios are the typical GPU pods' needs per GPU milli, ascending
	// (zero needs left out); above[i] and aboveInv[i] are the sums of the
	// GPU weights w and of w/ratio over ratios[i:], the weights summing
	// to 1 over every GPU pod.
	ratios, above, aboveInv []float64
}

// hostNeeds works out the CPU and memory needs of d.
func hostNeeds(d Distribution) (cpu, mem hostNeed) {
	type point struct{ cpu, mem, milli, count, weight float64 }
	var pts []point
	var allCPU, allMem, allGPU float64
	for _, x := range d {
		gpu := float64(x.Shape.GPUMilli) * float64(x.Shape.GPUCount)
		allCPU += x.Weight * float64(x.Shape.CPUMilli)
		allMem += x.Weight * x.MemoryMiB
		allGPU += x.Weight * gpu
		if x.Shape.GPUCount == 0 || gpu <= 0 {
			continue
		}
		pts = append(pts, point{float64(x.Shape.CPUMilli), x.MemoryMiB, float64(x.Shape.GPUMilli), float64(x.Shape.GPUCount), x.Weight})
	}
	if allGPU <= 0 {
		return hostNeed{}, hostNeed{}
	}
	build := func(need func(point) float64, all float64) hostNeed {
		h := hostNeed{demand: all / allGPU}
		type ratio struct{ r, w float64 }
		var rs []ratio
		var total, asked float64
		for _, p := range pts {
			// The products in this order, as the policy has always
			// worked out the mean (the shared traces' results stay
			// byte for byte what they were).
			w := p.weight * p.milli * p.count
			total += w
			asked += p.weight * need(p)
			if r := need(p) / (p.milli * p.count); r > 0 {
				rs = append(rs, ratio{r, w})
			}
		}
		h.mean = asked / total
		sort.Slice(rs, func(i, j int) bool { return rs[i].r < rs[j].r })
		h.ratios = make([]float64, len(rs))
		h.above = make([]float64, len(rs)+1)
		h.aboveInv = make([]float64, len(rs)+1)
		for i := len(rs) - 1; i >= 0; i-- {
			h.ratios[i] = rs[i].r
			h.above[i] = h.above[i+1] + rs[i].w/total
			h.aboveInv[i] = h.aboveInv[i+1] + rs[i].w/total/rs[i].r
		}
		return h
	}
	cpu = build(func(p point) float64 { return p.cpu }, allCPU)
	mem = build(func(p point) float64 { return p.mem }, allMem)
	return cpu, mem
}

// stranded is the free GPU compute (milli) that free host resource
// cannot feed: at the mean need, or, when the workload is host-bound, as
// the expectation over the typical pods' needs.
func (h *hostNeed) stranded(freeGPU, free int64, hostBound bool) float64 {
	if h.mean <= 0 || freeGPU <= 0 {
		return 0
	}
	g, c := float64(freeGPU), math.Max(0, float64(free))
	if !hostBound {
		return math.Max(0, g-c/h.mean)
	}
	// Pods whose need exceeds c/g leave g - c/r unfed; the others none.
	x := c / g
	i := sort.Search(len(h.ratios), func(i int) bool { return h.ratios[i] > x })
	return math.Max(0, g*h.above[i]-c*h.aboveInv[i])
}

// hostSupply is a cluster's CPU milli and memory MiB per GPU milli of
// capacity, remembered for the cluster last seen (by its node count and
// node array: capacities change only when nodes are replaced).
type hostSupply struct {
	n        int
	base     *Node
	cpu, mem float64
}

// of returns the supply of c, working it out when c is not the cluster
// last seen.
func (s *hostSupply) of(c *Cluster) (cpu, mem float64) {
	if len(c.Nodes) == 0 {
		return 0, 0
	}
	if s.n == len(c.Nodes) && s.base == &c.Nodes[0] {
		return s.cpu, s.mem
	}
	var tc, tm, tg float64
	for i := range c.Nodes {
		n := &c.Nodes[i]
		tc += float64(n.CPUMilli)
		tm += float64(n.MemoryMiB)
		tg += float64(len(n.GPUs)) * 1000
	}
	*s = hostSupply{n: len(c.Nodes), base: &c.Nodes[0]}
	if tg > 0 {
		s.cpu, s.mem = tc/tg, tm/tg
	}
	return s.cpu, s.mem
}
