package booked

import (
	"slices"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/queueing"
)

// Running is every workload booked on a node as a cycle.Running, node by
// node in booking order (preemption's candidates: an inexact booking
// cannot be released exactly, so it is Stopping and never a victim). A
// hold of no workload of its own that only one booked workload holds runs
// with it: stopping the workload frees it. Worked out again only after a
// change; the caller must not change what it returns.
func (c *Cluster) Running() []cycle.Running {
	c.settle()
	if c.running != nil {
		return c.running
	}
	out := make([]cycle.Running, 0, len(c.holds))
	at := make(map[string]int, len(c.holds))
	for ni := range c.nodes {
		for _, h := range c.nodes[ni].holds {
			if h.For != nil {
				continue
			}
			at[h.ID] = len(out)
			out = append(out, cycle.Running{ID: h.ID, Queue: h.Queue, Priority: h.Priority, Gang: h.Gang, Started: h.Started,
				Parts: h.parts, Decisions: h.decs, Stopping: h.Stopping || !h.exact})
		}
	}
	for ni := range c.nodes {
		for _, h := range c.nodes[ni].holds {
			if len(h.For) != 1 || !h.exact || len(h.parts) == 0 {
				continue
			}
			i, ok := at[h.For[0]]
			if !ok {
				continue
			}
			r := &out[i]
			// A copy: the owner's own parts stay as booked.
			r.Parts = append(slices.Clip(r.Parts), h.parts...)
			r.Decisions = append(slices.Clip(r.Decisions), h.decs...)
		}
	}
	c.running = out
	return out
}

// Usage is what the booked workloads take from their queues; a hold of no
// workload of its own is charged once, to the queue of the first workload
// it serves that is booked (none: to no queue). Worked out again only
// after a change; the caller must not change what it returns.
func (c *Cluster) Usage() map[string]queueing.Resources {
	c.settle()
	if c.usage != nil {
		return c.usage
	}
	u := map[string]queueing.Resources{}
	for ni := range c.nodes {
		for _, h := range c.nodes[ni].holds {
			q, ok := h.Queue, h.For == nil
			for _, id := range h.For {
				if o := c.holds[id]; o != nil && o.ni >= 0 && o.For == nil {
					q, ok = o.Queue, true
					break
				}
			}
			if ok {
				u[q] = u[q].Add(h.use)
			}
		}
	}
	c.usage = u
	return u
}
