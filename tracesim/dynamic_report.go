package tracesim

import (
	"fmt"
	"io"
	"strings"
)

// DynamicQueueTable writes the per-queue measures of results run with a
// queue config as a Markdown table, one row per run and queue; "" when
// none has queues.
func DynamicQueueTable(rs []*DynamicResult) string {
	var b strings.Builder
	for _, r := range rs {
		for _, q := range r.Queues {
			if b.Len() == 0 {
				b.WriteString("| trace | policy | seed | queue | pods | allocated % (time-weighted) | never started | delay mean s | p50 | p95 | p99 | preemptions | reclaims | lost GPU-h |\n")
				b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %.2f | %d | %.0f | %.0f | %.0f | %.0f | %d | %d | %.1f |\n",
				r.Trace, r.Policy, r.Seed, q.Queue, q.Pods, q.AllocatedPct, q.NeverStarted, q.DelayMean, q.DelayP50, q.DelayP95, q.DelayP99, q.Preemptions, q.Reclaims, q.LostGPUHours)
		}
	}
	return b.String()
}

// DynamicQueueMeans writes the per-queue means over seeds of each trace,
// policy and queue, in the order they first appear; "" when no result has
// queues.
func DynamicQueueMeans(rs []*DynamicResult) string {
	type key struct{ trace, policy, queue string }
	var order []key
	groups := map[key][]QueueResult{}
	for _, r := range rs {
		for _, q := range r.Queues {
			k := key{r.Trace, r.Policy, q.Queue}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], q)
		}
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| trace | policy | queue | seeds | allocated % (time-weighted) | never started | delay mean s | p50 | p95 | p99 | preemptions | reclaims | lost GPU-h |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		g := groups[k]
		mean := func(f func(QueueResult) float64) float64 {
			var s float64
			for _, q := range g {
				s += f(q)
			}
			return s / float64(len(g))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", k.trace, k.policy, k.queue, len(g),
			mean(func(q QueueResult) float64 { return q.AllocatedPct }),
			mean(func(q QueueResult) float64 { return float64(q.NeverStarted) }),
			mean(func(q QueueResult) float64 { return q.DelayMean }),
			mean(func(q QueueResult) float64 { return q.DelayP50 }),
			mean(func(q QueueResult) float64 { return q.DelayP95 }),
			mean(func(q QueueResult) float64 { return q.DelayP99 }),
			mean(func(q QueueResult) float64 { return float64(q.Preemptions) }),
			mean(func(q QueueResult) float64 { return float64(q.Reclaims) }),
			mean(func(q QueueResult) float64 { return q.LostGPUHours }))
	}
	return b.String()
}

// WriteQueueSeriesCSV writes every run's per-queue samples: trace, policy,
// seed, time, queue, allocated % (of the cluster), waiting pods.
func WriteQueueSeriesCSV(w io.Writer, rs []*DynamicResult) error {
	if _, err := io.WriteString(w, "trace,policy,seed,time_s,queue,allocated_pct,waiting\n"); err != nil {
		return err
	}
	for _, r := range rs {
		for _, s := range r.Series {
			for qi, q := range s.Queues {
				if _, err := fmt.Fprintf(w, "%s,%s,%d,%.3f,%s,%.4f,%d\n", r.Trace, r.Policy, r.Seed, s.Time, r.Queues[qi].Queue, q.AllocatedPct, q.Waiting); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
