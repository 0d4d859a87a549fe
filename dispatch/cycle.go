package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/queueing"
)

// unit is one thing a cycle serves: a workload, or a gang's waiting
// members (at its first member's place, in that member's queue).
type unit struct {
	key     string
	queue   string
	gang    string
	members []*state
	// first is its first member's ID (for messages).
	first string
	// held: it is not served this cycle (backing off, or refused before
	// the engine saw it); in a strict cycle it holds up those behind it.
	held bool
}

// Cycle runs one scheduling cycle at now on the frame and returns what to
// do. The frame's cluster ends with every placement booked. An error means
// a bug (a decision that does not apply): the cluster is then in an
// unknown state and the front door must rebuild it (ResetBooks, for a
// frame on the core's books).
func (c *Core) Cycle(now time.Time, f Frame) (Ready, error) {
	var rd Ready
	own := f.Cluster == nil
	booksRun := own && f.Running == nil // the running workloads are the books'
	if own {
		f = c.onBooks(f)
	}
	if f.IdleSince != nil && c.cfg.Preemption {
		f.Running = withIdle(f.Running, f.IdleSince)
	}
	c.teach(f)
	units := c.units(now)
	rd.Order = make([]string, 0, len(c.items))
	for _, u := range units {
		for _, s := range u.members {
			rd.Order = append(rd.Order, s.ID)
		}
	}
	tree := f.Queues
	if tree == nil {
		var err error
		if tree, err = queueing.NewTree(nil); err != nil {
			return rd, fmt.Errorf("default queue tree: %w", err)
		}
	}
	tr := &translations{f: f, done: map[string]translated{}}
	snap := cycle.Snapshot{Cluster: f.Cluster, Policy: f.Policy, Queues: tree, Usage: f.Usage, Capacity: f.Capacity,
		Gangs: map[string]cycle.Gang{}, Running: f.Running, Strict: c.cfg.Strict}
	specs := map[string]GangSpec{}
	all := make([]unit, 0, len(units))
	for _, u := range units {
		u.held = true
		all = append(all, u)
		u := &all[len(all)-1]
		if c.backoff.waiting(u.key, now) {
			rd.BackingOff += len(u.members)
			continue
		}
		// A nominated unit is never skipped: its room is held for it.
		if f.Skip != nil && c.noms[u.key] == nil && u.skipped(f.Skip) {
			rd.Skipped += len(u.members)
			continue
		}
		rd.Tried++
		if _, ok := tree.Queue(u.queue); !ok {
			c.refuseAll(&rd, *u, now, cycle.Invalid, CauseUnknownQueue, fmt.Sprintf("queue %q does not exist", u.queue), nil)
			continue
		}
		if u.gang != "" {
			spec := GangSpec{Err: fmt.Errorf("gang %s: no definition is known", u.gang)}
			if f.Gang != nil {
				spec = f.Gang(u.gang)
			}
			specs[u.gang] = spec
			if spec.Err != nil {
				c.refuseAll(&rd, *u, now, cycle.Invalid, CauseRefused, spec.Err.Error(), spec.Err)
				continue
			}
			snap.Gangs[u.gang] = cycle.Gang{MinMember: spec.Min}
		}
		kept := u.members[:0:0]
		for _, s := range u.members {
			w, err := tr.get(s.ID)
			if err != nil {
				var un Unready
				if errors.As(err, &un) {
					c.wait(&rd, s, now, Wait{Status: cycle.NoFit, Cause: CauseUnready, Message: err.Error(), Err: err}, failedToFit)
				} else {
					c.wait(&rd, s, now, Wait{Status: cycle.Invalid, Cause: CauseRefused, Message: err.Error(), Err: err}, failedToFit)
				}
				continue
			}
			w.Queue, w.Gang = u.queue, u.gang // a gang is served in its first member's queue
			w.Priority = s.Priority           // the item's, not the translation's: preemption ranks by it
			w.AwaitingVictims = w.AwaitingVictims || now.Before(s.preemptUntil)
			tr.done[s.ID] = translated{w: w}
			kept = append(kept, s)
		}
		u.members = kept
		u.held = len(kept) == 0
	}
	if c.cfg.Strict {
		all = c.fairOrder(all, tree, f, tr)
	}
	var served []unit
	for i, u := range all {
		if !u.held {
			served = append(served, u)
			continue
		}
		if !c.cfg.Strict {
			continue
		}
		// Strict: no workload overtakes one that waits.
		for _, b := range all[i+1:] {
			for _, s := range b.members {
				rd.Waits = append(rd.Waits, Wait{ID: s.ID, Status: cycle.Behind, Message: "behind " + u.first + ", which waits (strict order: no workload overtakes one that waits)"})
			}
		}
		break
	}
	if len(served) == 0 {
		rd.Next, _ = c.backoff.next(now)
		return rd, nil
	}
	c.countRunning(&snap, f, own)
	byID := map[string]*state{}
	unitOf := map[string]*unit{}
	for i := range served {
		u := &served[i]
		for _, s := range u.members {
			snap.Pending = append(snap.Pending, tr.done[s.ID].w)
			byID[s.ID], unitOf[s.ID] = s, u
		}
	}
	if c.cfg.Preemption {
		snap.Preemption = &cycle.Preemption{MinRuntime: c.cfg.MinRuntime, Now: now}
	}
	snap.Reservation = c.reservationFor(f, tr, byID)
	snap.Nominations = c.nominationsFor(f, booksRun)
	outs, err := cycle.Run(snap)
	if err != nil {
		return rd, fmt.Errorf("scheduling cycle: %w", err)
	}
	var misfit []*unit // gangs that did not fit, in the order served
	var named []int    // the outcomes that named victims
	for oi, o := range outs {
		s, ok := byID[o.Workload]
		if !ok {
			continue
		}
		u := unitOf[o.Workload]
		switch o.Status {
		case cycle.Placed:
			s.binding = true
			c.unblock(u.key)
			delete(c.noms, u.key)
			w := tr.done[s.ID].w
			c.binds++
			rd.Binds = append(rd.Binds, Bind{ID: s.ID, Gang: u.gang, Decisions: o.Decisions, Workload: w, Order: c.binds})
			if own {
				// Booked by the cycle as decided, until the front door
				// books the workload as bound (or its binding fails);
				// started now, as far as preemption is concerned.
				c.books.Assume(s.ID, cycle.Running{ID: s.ID, Queue: w.Queue, Priority: w.Priority, Gang: w.Gang, Started: now, Order: c.binds,
					Parts: w.Parts, Decisions: o.Decisions})
			}
			continue
		case cycle.GangWaiting, cycle.Behind:
			// Only a new member (or the head's start) helps: no backoff.
			rd.Waits = append(rd.Waits, Wait{ID: s.ID, Status: o.Status, Message: o.Message, Outcome: o})
			continue
		case cycle.Invalid:
			c.unblock(u.key)
		}
		if n := c.noms[u.key]; n != nil && !now.Before(n.until) {
			delete(c.noms, u.key) // tried once its wait is over: it may name others
		}
		wt := Wait{ID: s.ID, Status: o.Status, Message: o.Message, Err: o.Err, Outcome: o}
		if o.Status == cycle.GangMisfit {
			if spec := specs[u.gang]; spec.Timeout > 0 {
				if waited := now.Sub(u.oldest()); waited > spec.Timeout {
					wt.Message = fmt.Sprintf("gang %s timed out: it has not fitted for %s, over its schedule timeout (%s); ", u.gang, waited.Round(time.Second), spec.Timeout) + wt.Message
				}
			}
			if !slices.Contains(misfit, u) {
				misfit = append(misfit, u)
			}
		}
		if len(o.Victims) > 0 {
			rd.Evictions = append(rd.Evictions, Eviction{For: s.ID, Node: o.Node, Victims: o.Victims})
			s.preemptUntil = now.Add(c.cfg.PreemptorWait)
			named = append(named, oi)
		}
		wt.AwaitingVictims = len(o.Victims) == 0 && now.Before(s.preemptUntil)
		if o.Status == cycle.NoFit && u.gang == "" {
			c.maybeReserve(now, f, tr, u.key, c.noun(), []string{s.ID}, []string{s.ID})
		}
		c.wait(&rd, s, now, wt, failedToFit)
	}
	for _, oi := range named { // after the loop: a gang's other members do not end it
		s := byID[outs[oi].Workload]
		c.nominate(unitOf[s.ID], s, outs[oi], f, now)
	}
	for _, u := range misfit {
		g := snap.Gangs[u.gang]
		need := min(max(g.MinMember-g.Running, 0), len(u.members))
		ids := make([]string, len(u.members))
		for i, s := range u.members {
			ids[i] = s.ID
		}
		c.maybeReserve(now, f, tr, u.key, "gang "+u.gang, ids[:need], ids)
	}
	rd.Next, _ = c.backoff.next(now)
	return rd, nil
}

// noun names a workload waiting alone in reservation messages.
func (c *Core) noun() string {
	if c.cfg.Noun == "" {
		return "a workload"
	}
	return "a " + c.cfg.Noun
}

// wait records that s waits, backed off for why (the gang's key once per
// cycle: a failure reported again while the key waits does not count).
func (c *Core) wait(rd *Ready, s *state, now time.Time, w Wait, why failure) {
	w.ID = s.ID
	c.backoff.failed(s.key(), why, now)
	w.Retry = c.backoff.until(s.key())
	rd.Waits = append(rd.Waits, w)
}

// refuseAll makes every member of u wait for one reason.
func (c *Core) refuseAll(rd *Ready, u unit, now time.Time, st cycle.Status, cause Cause, msg string, err error) {
	for _, s := range u.members {
		c.wait(rd, s, now, Wait{Status: st, Cause: cause, Message: msg, Err: err}, failedToFit)
	}
}

// units orders the waiting workloads (not binding) and groups gangs.
func (c *Core) units(now time.Time) []unit {
	ws := make([]*state, 0, len(c.items))
	for _, s := range c.items {
		if !s.binding {
			ws = append(ws, s)
		}
	}
	prio := func(s *state) int64 {
		p := int64(s.Priority)
		if c.cfg.AgingStep > 0 {
			since := s.Since
			if since.IsZero() {
				since = s.Arrived
			}
			if waited := now.Sub(since); waited > 0 {
				p += int64(waited / c.cfg.AgingStep)
			}
		}
		return p
	}
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if pa, pb := prio(a), prio(b); pa != pb {
			return pa > pb
		}
		if !a.Arrived.Equal(b.Arrived) {
			return a.Arrived.Before(b.Arrived)
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.ID < b.ID
	})
	var out []unit
	gangAt := map[string]int{}
	for _, s := range ws {
		if s.Gang != "" {
			if i, ok := gangAt[s.Gang]; ok {
				out[i].members = append(out[i].members, s)
				continue
			}
			gangAt[s.Gang] = len(out)
		}
		out = append(out, unit{key: s.key(), queue: queueing.QueueOr(s.Queue), gang: s.Gang, members: []*state{s}, first: s.ID})
	}
	return out
}

// skipped reports whether skip names every member of u.
func (u *unit) skipped(skip func(id string) bool) bool {
	for _, s := range u.members {
		if !skip(s.ID) {
			return false
		}
	}
	return true
}

// oldest is when the unit's earliest member arrived.
func (u *unit) oldest() time.Time {
	var t time.Time
	for _, s := range u.members {
		if t.IsZero() || s.Arrived.Before(t) {
			t = s.Arrived
		}
	}
	return t
}

// onBooks is f on the core's books: their cluster, and their usage,
// capacity and running workloads where f gives none.
func (c *Core) onBooks(f Frame) Frame {
	f.Cluster = c.books.Cluster()
	if f.Usage == nil {
		f.Usage = c.books.Usage()
	}
	if f.Capacity == (queueing.Resources{}) {
		f.Capacity = c.books.Capacity()
	}
	if f.Running == nil {
		f.Running = c.books.Running()
	}
	return f
}

// withIdle is a copy of running with each workload's idle mark from since
// (a copy: the books' entries must not keep a mark past this cycle). A
// mark from before a workload started is an earlier one's of the same ID
// (a pod made again under its name, as an agent last published it): none.
func withIdle(running []cycle.Running, since func(id string) time.Time) []cycle.Running {
	out := slices.Clone(running)
	for i := range out {
		if t := since(out[i].ID); !t.Before(out[i].Started) {
			out[i].IdleSince = t
		}
	}
	return out
}

// countRunning gives every pending gang its running members and every
// running gang its minimum (a gang is never preempted below it).
func (c *Core) countRunning(snap *cycle.Snapshot, f Frame, own bool) {
	var running map[string]int
	if own {
		running = c.books.Gangs() // kept as they are booked
	} else {
		running = map[string]int{}
		for i := range f.Running {
			if k := f.Running[i].Gang; k != "" {
				running[k]++
			}
		}
	}
	for k, n := range running {
		g, ok := snap.Gangs[k]
		if !ok {
			if f.Gang == nil {
				continue
			}
			spec := f.Gang(k)
			if spec.Err != nil {
				continue
			}
			g = cycle.Gang{MinMember: spec.Min}
		}
		g.Running += n
		snap.Gangs[k] = g
	}
}

// fairOrder orders units across queues for a strict cycle: each step
// takes the head of the queue the fair-share ledger puts first and
// charges what its members ask.
func (c *Core) fairOrder(units []unit, tree *queueing.Tree, f Frame, tr *translations) []unit {
	capacity := f.Capacity
	if capacity.IsZero() {
		capacity = cycle.Capacity(f.Cluster)
	}
	usage := f.Usage
	if usage == nil {
		usage = map[string]queueing.Resources{}
	}
	l := tree.NewLedger(capacity, usage)
	byQueue := map[string][]unit{}
	for _, u := range units {
		byQueue[u.queue] = append(byQueue[u.queue], u)
	}
	out := make([]unit, 0, len(units))
	queueing.Serve(l, byQueue, func(_ string, u unit) (queueing.Resources, bool) {
		out = append(out, u)
		var need queueing.Resources
		for _, s := range u.members {
			if d, ok := tr.done[s.ID]; ok && d.err == nil {
				need = need.Add(cycle.Resources(d.w.Parts))
			}
		}
		return need, false
	})
	return out
}

// translated is one workload's translation in a cycle.
type translated struct {
	w   cycle.Workload
	err error
}

// translations works each workload out at most once per cycle.
type translations struct {
	f    Frame
	done map[string]translated
}

func (t *translations) get(id string) (cycle.Workload, error) {
	if d, ok := t.done[id]; ok {
		return d.w, d.err
	}
	if t.f.Translate == nil {
		return cycle.Workload{}, errors.New("the front door translates no workload")
	}
	w, err := t.f.Translate(id)
	t.done[id] = translated{w: w, err: err}
	return w, err
}
