package tracesim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// Breakdown explains where a replay leaves GPU capacity unallocated once
// every pod has arrived: by what each GPU holds, by node type, and how many
// sharing pods of each size arrived and found room. It only describes the
// result; recording it does not change any decision.
type Breakdown struct {
	// FirstFailure is the arrival (0-based) of the first GPU pod dropped,
	// -1 when none was; FirstFailurePct is the GPU demand arrived before
	// it, as a share of capacity (%).
	FirstFailure    int     `json:"first_failure"`
	FirstFailurePct float64 `json:"first_failure_pct"`
	// Holdings is the unallocated compute by what its GPU holds, most
	// unallocated first; GPUs left with nothing free are not listed.
	Holdings []Holding `json:"holdings"`
	// NodeTypes is the end state per node type, most GPUs first.
	NodeTypes []NodeTypeUse `json:"node_types"`
	// Shares counts the sharing pods by compute share, largest first.
	Shares []ShareCount `json:"shares"`
}

// Holding is a set of GPUs that ended holding the same sharing pods.
type Holding struct {
	// Pods lists the sharing pods' compute (milli), largest first, joined
	// by "+" ("810", "470+470"); "free" is a GPU nothing took.
	Pods string `json:"pods"`
	GPUs int    `json:"gpus"`
	// UnallocatedPct is their free compute as a share of cluster GPU
	// capacity (%).
	UnallocatedPct float64 `json:"unallocated_pct"`
}

// NodeTypeUse is the end state of the nodes of one type (same GPU model,
// GPU count and CPU).
type NodeTypeUse struct {
	// Type reads "G2 8 GPUs 96 CPUs".
	Type  string `json:"type"`
	Nodes int    `json:"nodes"`
	GPUs  int    `json:"gpus"`
	// UnallocatedPct is their free GPU compute as a share of cluster GPU
	// capacity (%).
	UnallocatedPct float64 `json:"unallocated_pct"`
	// FreeCPUPct is their free CPU and CPUOnlyPct the CPU held by pods
	// without GPUs, both as a share of these nodes' CPU (%).
	FreeCPUPct float64 `json:"free_cpu_pct"`
	CPUOnlyPct float64 `json:"cpu_only_pct"`
}

// ShareCount is how many sharing pods of one compute share arrived and
// how many were placed.
type ShareCount struct {
	Milli   int64 `json:"milli"`
	Arrived int   `json:"arrived"`
	Placed  int   `json:"placed"`
}

// recorder follows a replay for its Breakdown.
type recorder struct {
	gpuBase []int     // flat index of each node's first GPU
	held    [][]int64 // per flat GPU: the compute of the sharing pods on it
	cpuOnly []int64   // per node: CPU milli held by pods without GPUs
	shares  map[int64]*ShareCount
	first   int
	firstAt float64
}

func newRecorder(c *placement.Cluster) *recorder {
	r := &recorder{gpuBase: make([]int, len(c.Nodes)), cpuOnly: make([]int64, len(c.Nodes)), shares: map[int64]*ShareCount{}, first: -1}
	n := 0
	for i := range c.Nodes {
		r.gpuBase[i] = n
		n += len(c.Nodes[i].GPUs)
	}
	r.held = make([][]int64, n)
	return r
}

func (r *recorder) share(p *placement.Pod) *ShareCount {
	m := p.MilliPerGPU()
	s := r.shares[m]
	if s == nil {
		s = &ShareCount{Milli: m}
		r.shares[m] = s
	}
	return s
}

// arrived notes arrival i, pod p, placed by d or dropped, with
// arrivedBefore GPU milli arrived before it out of a capacity of total.
func (r *recorder) arrived(i int, p *placement.Pod, d placement.Decision, placed bool, arrivedBefore, total int64) {
	if p.Sharing() {
		s := r.share(p)
		s.Arrived++
		if placed {
			s.Placed++
		}
	}
	switch {
	case !placed:
		if r.first < 0 && p.GPUCount() > 0 {
			r.first, r.firstAt = i, 100*float64(arrivedBefore)/float64(total)
		}
	case p.GPUCount() == 0:
		r.cpuOnly[d.Node] += p.CPUMilli
	case p.Sharing():
		for _, g := range d.GPUs {
			k := r.gpuBase[d.Node] + g
			r.held[k] = append(r.held[k], p.MilliPerGPU())
		}
	}
}

// finish reads the end state c (total GPU milli total) into a Breakdown.
func (r *recorder) finish(c *placement.Cluster, total int64) *Breakdown {
	b := &Breakdown{FirstFailure: r.first, FirstFailurePct: r.firstAt}
	pct := func(milli int64) float64 { return 100 * float64(milli) / float64(total) }
	holdings := map[string]*Holding{}
	type nodeTypeSums struct {
		use                NodeTypeUse
		cpu, free, cpuOnly int64
	}
	types := map[string]*nodeTypeSums{}
	for ni := range c.Nodes {
		n := &c.Nodes[ni]
		key := nodeType(n)
		t := types[key]
		if t == nil {
			t = &nodeTypeSums{use: NodeTypeUse{Type: key}}
			types[key] = t
		}
		t.use.Nodes++
		t.use.GPUs += len(n.GPUs)
		t.cpu += n.CPUMilli
		t.free += n.FreeCPUMilli
		t.cpuOnly += r.cpuOnly[ni]
		for gi := range n.GPUs {
			free := n.GPUs[gi].FreeMilli
			if free == 0 {
				continue
			}
			t.use.UnallocatedPct += pct(free)
			pods := holdingName(r.held[r.gpuBase[ni]+gi], free)
			h := holdings[pods]
			if h == nil {
				h = &Holding{Pods: pods}
				holdings[pods] = h
			}
			h.GPUs++
			h.UnallocatedPct += pct(free)
		}
	}
	for _, h := range holdings {
		b.Holdings = append(b.Holdings, *h)
	}
	slices.SortFunc(b.Holdings, func(x, y Holding) int {
		return cmp.Or(cmp.Compare(y.UnallocatedPct, x.UnallocatedPct), cmp.Compare(x.Pods, y.Pods))
	})
	for _, t := range types {
		if t.cpu > 0 {
			t.use.FreeCPUPct = 100 * float64(t.free) / float64(t.cpu)
			t.use.CPUOnlyPct = 100 * float64(t.cpuOnly) / float64(t.cpu)
		}
		b.NodeTypes = append(b.NodeTypes, t.use)
	}
	slices.SortFunc(b.NodeTypes, func(x, y NodeTypeUse) int {
		return cmp.Or(cmp.Compare(y.GPUs, x.GPUs), cmp.Compare(x.Type, y.Type))
	})
	for _, s := range r.shares {
		b.Shares = append(b.Shares, *s)
	}
	slices.SortFunc(b.Shares, func(x, y ShareCount) int { return cmp.Compare(y.Milli, x.Milli) })
	return b
}

// holdingName names what a GPU holds: its sharing pods largest first, or
// "free" for a GPU nothing took.
func holdingName(pods []int64, free int64) string {
	if len(pods) == 0 {
		if free == request.Whole {
			return "free"
		}
		return "other" // taken by a pod that is not a fractional share
	}
	s := slices.Clone(pods)
	slices.SortFunc(s, func(a, b int64) int { return cmp.Compare(b, a) })
	parts := make([]string, len(s))
	for i, m := range s {
		parts[i] = strconv.FormatInt(m, 10)
	}
	return strings.Join(parts, "+")
}

// nodeType labels a node by GPU model, GPU count and CPU.
func nodeType(n *placement.Node) string {
	model := "no GPU"
	if len(n.GPUs) > 0 {
		model = n.GPUs[0].Model
	}
	return fmt.Sprintf("%s %d GPUs %d CPUs", model, len(n.GPUs), n.CPUMilli/1000)
}
