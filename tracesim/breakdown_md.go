package tracesim

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// breakdownHoldings is how many holdings a trace x policy section lists
// before it sums the rest into one line.
const breakdownHoldings = 12

// WriteBreakdown writes, as Markdown, one section per trace and policy
// (in the order of Table) with the means over seeds of the results'
// breakdowns: what the GPUs left with free compute hold, the end state
// per node type and the sharing pods placed of those that arrived.
// Results without a breakdown are skipped.
func WriteBreakdown(w io.Writer, results []*Result, policyOrder []string) error {
	groups := map[[2]string][]*Result{}
	var with []*Result
	for _, r := range results {
		if r.Breakdown == nil {
			continue
		}
		k := [2]string{r.Trace, r.Policy}
		if groups[k] == nil {
			with = append(with, r)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	for _, row := range Table(with, policyOrder, nil) {
		writeBreakdownSection(&b, groups[[2]string{row.Trace, row.Policy}])
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write breakdown: %w", err)
	}
	return nil
}

func writeBreakdownSection(b *strings.Builder, rs []*Result) {
	n := float64(len(rs))
	var end, firstAt float64
	var dropped int
	holdings := map[string]*Holding{}
	types := map[string]*NodeTypeUse{}
	var typeOrder []string
	shares := map[int64]*[2]float64{}
	for _, r := range rs {
		end += r.AllocatedPctEnd / n
		if bd := r.Breakdown; bd.FirstFailure >= 0 {
			firstAt += bd.FirstFailurePct
			dropped++
		}
		for _, h := range r.Breakdown.Holdings {
			acc := holdings[h.Pods]
			if acc == nil {
				acc = &Holding{Pods: h.Pods}
				holdings[h.Pods] = acc
			}
			acc.GPUs += h.GPUs
			acc.UnallocatedPct += h.UnallocatedPct / n
		}
		for _, t := range r.Breakdown.NodeTypes {
			acc := types[t.Type]
			if acc == nil {
				acc = &NodeTypeUse{Type: t.Type, Nodes: t.Nodes, GPUs: t.GPUs}
				types[t.Type] = acc
				typeOrder = append(typeOrder, t.Type)
			}
			acc.UnallocatedPct += t.UnallocatedPct / n
			acc.FreeCPUPct += t.FreeCPUPct / n
			acc.CPUOnlyPct += t.CPUOnlyPct / n
		}
		for _, s := range r.Breakdown.Shares {
			acc := shares[s.Milli]
			if acc == nil {
				acc = new([2]float64)
				shares[s.Milli] = acc
			}
			acc[0] += float64(s.Arrived) / n
			acc[1] += float64(s.Placed) / n
		}
	}
	fmt.Fprintf(b, "## %s / %s (%d seeds)\n\n", rs[0].Trace, rs[0].Policy, len(rs))
	fmt.Fprintf(b, "Allocated at the end: %.2f%% (unallocated %.2f%%). ", end, 100-end)
	if dropped > 0 {
		fmt.Fprintf(b, "First GPU pod dropped at %.1f%% arrived demand (mean of the %d seeds that dropped one).\n\n", firstAt/float64(dropped), dropped)
	} else {
		b.WriteString("No GPU pod was dropped.\n\n")
	}

	hs := make([]Holding, 0, len(holdings))
	for _, h := range holdings {
		hs = append(hs, *h)
	}
	slices.SortFunc(hs, func(x, y Holding) int {
		return cmp.Or(cmp.Compare(y.UnallocatedPct, x.UnallocatedPct), cmp.Compare(x.Pods, y.Pods))
	})
	b.WriteString("| GPU holds (sharing pods, milli) | GPUs | unallocated % of capacity |\n|---|---|---|\n")
	var restGPUs int
	var restPct float64
	for i, h := range hs {
		if i >= breakdownHoldings {
			restGPUs += h.GPUs
			restPct += h.UnallocatedPct
			continue
		}
		fmt.Fprintf(b, "| %s | %.1f | %.3f |\n", h.Pods, float64(h.GPUs)/n, h.UnallocatedPct)
	}
	if restGPUs > 0 {
		fmt.Fprintf(b, "| %d others | %.1f | %.3f |\n", len(hs)-breakdownHoldings, float64(restGPUs)/n, restPct)
	}

	ts := make([]NodeTypeUse, 0, len(types))
	for _, k := range typeOrder {
		ts = append(ts, *types[k])
	}
	slices.SortFunc(ts, func(x, y NodeTypeUse) int { return cmp.Or(cmp.Compare(y.GPUs, x.GPUs), cmp.Compare(x.Type, y.Type)) })
	b.WriteString("\n| node type | nodes | GPUs | unallocated % of capacity | free CPU % | CPU held by CPU-only pods % |\n|---|---|---|---|---|---|\n")
	for _, t := range ts {
		fmt.Fprintf(b, "| %s | %d | %d | %.3f | %.1f | %.1f |\n", t.Type, t.Nodes, t.GPUs, t.UnallocatedPct, t.FreeCPUPct, t.CPUOnlyPct)
	}

	ms := make([]int64, 0, len(shares))
	for m := range shares {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(x, y int64) int { return cmp.Compare(y, x) })
	b.WriteString("\n| sharing pod (milli) | arrived | placed | placed % |\n|---|---|---|---|\n")
	for _, m := range ms {
		s := shares[m]
		pct := 0.0
		if s[0] > 0 {
			pct = 100 * s[1] / s[0]
		}
		fmt.Fprintf(b, "| %d | %.1f | %.1f | %.1f |\n", m, s[0], s[1], pct)
	}
	b.WriteString("\n")
}
