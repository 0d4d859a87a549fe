package booked

import (
	"cmp"
	"maps"
	"slices"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/queueing"
)

// Running is every workload booked on a node as a cycle.Running
// (preemption's candidates: an inexact booking cannot be released
// exactly, so it is Stopping and never a victim). A hold of no workload of
// its own that only one booked workload holds runs with it: stopping the
// workload frees it. The entries are kept from one read to the next and
// brought up to date with the holds touched since, so a read costs what
// changed; their order follows the events (a workload gone leaves its
// place to the last one).
//
// What it returns is the books' own entries, not a copy (a copy costs
// more than the read at 50,000 running): it is read only, each entry's
// Parts and Decisions too, and it holds until the next event, which may
// rewrite the entries in place. A caller that keeps it longer clones it.
// It is clipped, so that appending to it copies.
func (c *Cluster) Running() []cycle.Running {
	c.settle()
	if c.runStale {
		for _, h := range c.runHeld {
			h.ri = -1
		}
		c.running, c.runHeld, c.runStale = c.running[:0], c.runHeld[:0], false
		for ni := range c.nodes {
			for _, h := range c.nodes[ni].holds {
				c.touched[h] = true
			}
		}
	}
	// In booking order, so that the entries' order follows the events
	// alone.
	touched := slices.SortedFunc(maps.Keys(c.touched), bySeq)
	clear(c.touched)
	for _, h := range touched {
		in := h.ni >= 0 && h.For == nil && c.holds[h.ID] == h
		switch {
		case in && h.ri >= 0:
			c.running[h.ri] = runningOf(h)
		case in:
			h.ri = len(c.running)
			c.running, c.runHeld = append(c.running, runningOf(h)), append(c.runHeld, h)
		case h.ri >= 0:
			last := len(c.running) - 1
			c.running[h.ri], c.runHeld[h.ri] = c.running[last], c.runHeld[last]
			c.runHeld[h.ri].ri = h.ri
			c.running, c.runHeld = c.running[:last], c.runHeld[:last]
			h.ri = -1
		}
	}
	if len(c.shared) == 0 {
		return slices.Clip(c.running)
	}
	out := slices.Clone(c.running)
	for _, h := range slices.SortedFunc(maps.Keys(c.shared), bySeq) {
		if h.ni < 0 || len(h.For) != 1 || !h.exact || len(h.parts) == 0 {
			continue
		}
		o := c.holds[h.For[0]]
		if o == nil || o.ri < 0 {
			continue
		}
		r := &out[o.ri]
		// A copy: the owner's own parts stay as booked.
		r.Parts = append(slices.Clip(r.Parts), h.parts...)
		r.Decisions = append(slices.Clip(r.Decisions), h.decs...)
	}
	return out
}

func bySeq(a, b *held) int { return cmp.Compare(a.seq, b.seq) }

func runningOf(h *held) cycle.Running {
	return cycle.Running{ID: h.ID, Queue: h.Queue, Priority: h.Priority, Gang: h.Gang, Started: h.Started, Order: h.Order,
		Parts: h.parts, Decisions: h.decs, Stopping: h.Stopping || !h.exact}
}

// Usage is what the booked workloads take from their queues; a hold of no
// workload of its own is charged once, to the queue of the first workload
// it serves that is booked (none: to no queue). The workloads' own are
// kept as they are booked and released (charge); the caller must not
// change what it returns.
func (c *Cluster) Usage() map[string]queueing.Resources {
	c.settle()
	if c.usage != nil {
		return c.usage
	}
	u := maps.Clone(c.own)
	if u == nil {
		u = map[string]queueing.Resources{}
	}
	for h := range c.shared {
		if h.ni < 0 {
			continue
		}
		for _, id := range h.For {
			if o := c.holds[id]; o != nil && o.ni >= 0 && o.For == nil {
				u[o.Queue] = u[o.Queue].Add(h.use)
				break
			}
		}
	}
	c.usage = u
	return u
}

// charge adds (sign 1) or takes back (sign -1) what a booked hold of a
// workload takes from its queue; holds of no workload of their own are
// kept aside (Usage charges them).
func (c *Cluster) charge(h *held, sign int64) {
	if h.For != nil {
		if sign > 0 {
			c.shared[h] = true
		} else {
			delete(c.shared, h)
		}
		return
	}
	if h.Gang != "" {
		m := c.gangs[h.Gang]
		if sign > 0 {
			if m == nil {
				m = map[*held]bool{}
				c.gangs[h.Gang] = m
			}
			m[h] = true
		} else if delete(m, h); len(m) == 0 {
			delete(c.gangs, h.Gang)
		}
	}
	u := c.own[h.Queue]
	u.GPUMilli += sign * h.use.GPUMilli
	u.GPUMemoryMiB += sign * h.use.GPUMemoryMiB
	u.CPUMilli += sign * h.use.CPUMilli
	u.MemoryMiB += sign * h.use.MemoryMiB
	if u == (queueing.Resources{}) {
		delete(c.own, h.Queue)
	} else {
		c.own[h.Queue] = u
	}
}

// Gangs counts each gang's booked workloads (its running members), kept
// as they are booked and released.
func (c *Cluster) Gangs() map[string]int {
	c.settle()
	out := make(map[string]int, len(c.gangs))
	for g, m := range c.gangs {
		out[g] = len(m)
	}
	return out
}

// GangMember is one booked workload of gang g (the first booked), for a
// front door to read the gang's definition from; false when none is.
func (c *Cluster) GangMember(g string) (string, bool) {
	c.settle()
	var first *held
	for h := range c.gangs[g] {
		if first == nil || h.seq < first.seq {
			first = h
		}
	}
	if first == nil {
		return "", false
	}
	return first.ID, true
}
