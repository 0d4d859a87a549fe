package booked

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// engineNode is inv as the engine's node, with nothing booked. SetNode
// checked that the engine reads inv.
func engineNode(inv *inventory.Node) placement.Node {
	c, err := placement.FromInventory([]inventory.Node{*inv})
	if err != nil || len(c.Nodes) != 1 {
		return placement.Node{Name: inv.Name, Closed: "inventory cannot be read"}
	}
	return c.Nodes[0]
}

// uuidPositions maps each GPU's UUID to its position on the engine node.
func uuidPositions(n *placement.Node, inv *inventory.Node) map[string]int {
	m := make(map[string]int, len(n.GPUs))
	for pos, g := range n.GPUs {
		if in, ok := inv.GPUByIndex(g.Index); ok {
			m[in.UUID] = pos
		}
	}
	return m
}

// useOf is what a hold takes from its queue: its host requests and the
// compute and memory of its GPU shares.
func useOf(h Hold) queueing.Resources {
	r := queueing.Resources{CPUMilli: h.CPUMilli, MemoryMiB: h.MemoryMiB}
	for _, g := range h.Groups {
		for _, s := range g {
			r.GPUMilli += s.ComputeMilli
			r.GPUMemoryMiB += s.MemoryMiB
		}
	}
	return r
}

// place books h on node ni, among the node's other holds in booking
// order. Exact bookings do not depend on order; where one saturates, the
// node is booked again in order, so that which one saturates does not
// depend on the order of events either.
func (c *Cluster) place(ni int, h *held) error {
	n := &c.nodes[ni]
	h.ni = ni
	c.charge(h, 1)
	c.touch(h)
	at, _ := slices.BinarySearchFunc(n.holds, h.seq, func(a *held, seq uint64) int { return cmp.Compare(a.seq, seq) })
	n.holds = slices.Insert(n.holds, at, h)
	if n.inexact == 0 {
		err := c.apply(ni, h)
		if h.exact || at == len(n.holds)-1 {
			return err
		}
	}
	c.rebook(ni)
	if !h.exact {
		return fmt.Errorf("%s on node %s: booked over what the node reports", h.ID, n.name)
	}
	return nil
}

// unbook takes h off its node: exactly, or by booking the node again.
func (c *Cluster) unbook(h *held) {
	if h.ni < 0 {
		return
	}
	ni := h.ni
	n := &c.nodes[ni]
	n.holds = slices.DeleteFunc(n.holds, func(o *held) bool { return o == h })
	c.charge(h, -1)
	c.touch(h)
	h.ni = -1
	if n.inexact > 0 || !c.release(h) {
		c.rebook(ni)
	}
}

// release gives back what h took, last part first; false when the engine
// refuses (the node is then booked again).
func (c *Cluster) release(h *held) bool {
	for i := len(h.parts) - 1; i >= 0; i-- {
		if err := c.cluster.Release(&h.parts[i], h.decs[i]); err != nil {
			return false
		}
	}
	return true
}

// rebook books node ni again from its inventory, every hold in booking
// order.
func (c *Cluster) rebook(ni int) {
	n := &c.nodes[ni]
	c.cluster.Nodes[ni] = engineNode(&n.inv)
	c.cluster.Nodes[ni].Closed = n.closed
	n.uuidPos = uuidPositions(&c.cluster.Nodes[ni], &n.inv)
	n.inexact = 0
	for _, h := range n.holds {
		c.touch(h)
		if h.assumed {
			// As decided on this node: book the same parts again.
			h.exact = true
			for i := range h.parts {
				if !c.book(ni, &h.parts[i], h.decs[i]) {
					h.exact = false
				}
			}
			if !h.exact {
				n.inexact++
			}
			continue
		}
		_ = c.apply(ni, h)
	}
	c.cluster.Changed(ni)
}

// apply works out h's parts on node ni and books them; the error says why
// the booking is not exact.
func (c *Cluster) apply(ni int, h *held) error {
	n := &c.nodes[ni]
	h.parts, h.decs, h.exact = h.parts[:0], h.decs[:0], true
	host := placement.Pod{Name: h.ID, CPUMilli: h.CPUMilli, MemoryMiB: h.MemoryMiB, Slot: h.Slot}
	var errs []error
	if len(h.Groups) == 0 {
		h.parts, h.decs = append(h.parts, host), append(h.decs, placement.Decision{Node: ni})
	}
	for i, g := range h.Groups {
		p := placement.Pod{Name: fmt.Sprintf("%s/%d", h.ID, i), GPU: shareRequest(g)}
		if i == 0 {
			p.CPUMilli, p.MemoryMiB, p.Slot = h.CPUMilli, h.MemoryMiB, h.Slot
		}
		d := placement.Decision{Node: ni}
		for _, s := range g {
			uuid := s.UUID
			if s.MIG != nil {
				uuid = s.MIG.GPU
			}
			pos, ok := n.uuidPos[uuid]
			if !ok {
				errs = append(errs, fmt.Errorf("GPU %s is not on the node", uuid))
				continue
			}
			d.GPUs = append(d.GPUs, pos)
			if s.MIG != nil {
				// A MIG instance books as the MIG request it answered.
				p.GPU = request.GPU{ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: s.MIGProfile}
				d.MIG = append(d.MIG, c.migChoice(ni, pos, s))
			}
		}
		p.GPU.Count = len(d.GPUs)
		h.parts, h.decs = append(h.parts, p), append(h.decs, d)
	}
	for i := range h.parts {
		if !c.book(ni, &h.parts[i], h.decs[i]) {
			h.exact = false
		}
	}
	if !h.exact {
		n.inexact++
		errs = append(errs, errors.New("booked over what the node reports"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s on node %s: %w", h.ID, n.name, errors.Join(errs...))
	}
	return nil
}

// book books one part with the engine's checked Apply, or saturating at
// zero when it no longer fits (false), so the cluster never shows room
// that is in use.
func (c *Cluster) book(ni int, p *placement.Pod, d placement.Decision) bool {
	if c.cluster.Apply(p, d) == nil {
		return true
	}
	n := &c.cluster.Nodes[ni]
	n.FreeCPUMilli = max(0, n.FreeCPUMilli-p.CPUMilli)
	n.FreeMemoryMiB = max(0, n.FreeMemoryMiB-p.MemoryMiB)
	if p.Slot && n.Pods > 0 {
		n.FreePods = max(0, n.FreePods-1)
	}
	for _, gi := range d.GPUs {
		g := &n.GPUs[gi]
		g.FreeMilli = max(0, g.FreeMilli-p.GPU.ComputeMilli)
		g.FreeMemoryMiB = max(0, g.FreeMemoryMiB-p.GPU.MemoryMiB)
	}
	c.cluster.Changed(ni)
	return false
}

// shareRequest is the request whose booking takes exactly a group's
// shares (a group's shares are identical per GPU).
func shareRequest(g []binding.Share) request.GPU {
	if len(g) == 0 {
		return request.GPU{}
	}
	s := g[0]
	return request.GPU{Count: len(g), ComputeMilli: s.ComputeMilli, ComputeLimitMilli: s.ComputeLimitMilli, MemoryMiB: s.MemoryMiB, MemoryLimitMiB: s.MemoryLimitMiB}
}

// migChoice is the engine choice that books a MIG share again: the
// instance by its UUID, or, for one the node was asked to create, the
// instance the node now reports at its start, else a creation at its
// start.
//
// A node reports the instances its workloads hold as in use: the one this
// share holds is freed here, so that booking it takes it again (instances
// no hold names stay in use: their slices stay taken).
func (c *Cluster) migChoice(ni, pos int, s binding.Share) placement.MIGChoice {
	m := c.cluster.Nodes[ni].GPUs[pos].MIG
	own := func(uuid string) {
		if m == nil {
			return
		}
		for k := range m.Instances {
			if m.Instances[k].UUID == uuid {
				m.Instances[k].InUse = false
			}
		}
	}
	if !s.MIG.Create {
		own(s.UUID)
		return placement.MIGChoice{Start: s.MIG.Start, UUID: s.UUID}
	}
	if m != nil {
		for _, in := range m.Instances {
			if in.Start == s.MIG.Start && strings.EqualFold(in.Profile, s.MIGProfile) {
				own(in.UUID)
				return placement.MIGChoice{Start: s.MIG.Start, UUID: in.UUID}
			}
		}
	}
	return placement.MIGChoice{Start: s.MIG.Start, Create: true}
}
