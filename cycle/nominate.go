package cycle

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Nominee is a workload of a preemption plan and the node the plan puts it
// on, by index in the snapshot's cluster.
type Nominee struct {
	Workload Workload
	Node     int
}

// Nomination is the room a workload, or a gang, that named victims counts
// on until it is placed (kube-scheduler's nominated node): the others of
// lower or equal priority may use its nodes only where it still fits beside
// them once its victims stop; one of higher priority may take the room.
// When a nomination starts and ends is the caller's (Outcome.Plan says what
// a plan counts on); within a run, one whose room no longer fits holds
// nothing, one whose workloads are placed is used up, and one whose
// workloads are tried, not placed and not awaiting victims ends.
type Nomination struct {
	// What names it in rejections ("pod p").
	What string
	// For are its workloads (a gang's members that its plan places) on
	// their nodes; the first's Priority is the nomination's. Only their
	// IDs, Gang, Parts and Policy are read.
	For []Nominee
	// Victims are the running workloads it named: those still running are
	// taken as stopped when its room is checked, and no other workload
	// names them.
	Victims []string
}

// hold is a nomination in force in a run.
type hold struct {
	Nomination
	prio  int32
	gang  string
	ids   map[string]bool
	nodes map[int]bool
}

func newHold(n Nomination) *hold {
	h := &hold{Nomination: n, ids: map[string]bool{}, nodes: map[int]bool{}}
	if len(n.For) > 0 {
		h.prio, h.gang = n.For[0].Workload.Priority, n.For[0].Workload.Gang
	}
	for _, m := range n.For {
		h.ids[m.Workload.ID] = true
		h.nodes[m.Node] = true
	}
	return h
}

// owns reports whether w is one of h's workloads (or of its gang).
func (h *hold) owns(w Workload) bool { return h.ids[w.ID] || (h.gang != "" && w.Gang == h.gang) }

// nominate puts the snapshot's nominations in force: in order, each is
// booked on a what-if statement with its victims taken as stopped, and
// holds only when it fits beside the ones before it. The cluster is left
// as it was found.
func (r *run) nominate() error {
	if len(r.snap.Nominations) == 0 {
		return nil
	}
	r.victimOf = map[string]*hold{}
	st := NewStatement(r.snap.Cluster)
	for _, n := range r.snap.Nominations {
		h := newHold(n)
		for _, v := range n.Victims {
			r.victimOf[v] = h
		}
		if len(n.For) == 0 || slices.ContainsFunc(n.For, func(m Nominee) bool { return m.Node < 0 || m.Node >= len(r.snap.Cluster.Nodes) }) {
			continue
		}
		ok, err := r.book(st, h)
		if err != nil {
			return err
		}
		if ok {
			r.addHold(h)
		}
	}
	return st.Discard()
}

// book books h's workloads on their nodes through st, its victims still
// running released first. It keeps the bookings when all fit; otherwise
// it leaves st as it found it and returns false.
func (r *run) book(st *Statement, h *hold) (bool, error) {
	mark := st.Len()
	for _, id := range h.Victims {
		run := r.runningByID(id)
		if run == nil {
			continue // stopped
		}
		for i := range run.Parts {
			if err := st.Unbook(run.Parts[i], run.Decisions[i]); err != nil {
				return false, fmt.Errorf("room of %s: %w", h.What, err)
			}
		}
	}
	for _, m := range h.For {
		pol := m.Workload.Policy
		if pol == nil {
			pol = r.snap.Policy
		}
		_, fits, err := bookOn(st, pol, m.Workload.Parts, m.Node)
		if err != nil || !fits {
			return false, errors.Join(err, st.rollback(mark))
		}
	}
	return true, nil
}

func (r *run) addHold(h *hold) {
	r.holds = append(r.holds, h)
	if r.heldNodes == nil {
		r.heldNodes = map[int]int{}
	}
	for n := range h.nodes {
		r.heldNodes[n]++
	}
}

func (r *run) dropHold(h *hold) {
	i := slices.Index(r.holds, h)
	if i < 0 {
		return
	}
	r.holds = slices.Delete(r.holds, i, i+1)
	for n := range h.nodes {
		r.heldNodes[n]--
	}
	r.holdsEnded++ // room may be free for others: the misfit memo is stale
}

// heldFrom says why w, just booked on node through st, may not stay there
// ("" when it may): the room of a nomination of its priority or above on
// that node would no longer fit. st is left as it was found.
func (r *run) heldFrom(st *Statement, w Workload, node int) (string, error) {
	if r.heldNodes[node] == 0 {
		return "", nil
	}
	mark := st.Len()
	for _, h := range r.holds {
		if !h.nodes[node] || h.prio < w.Priority || h.owns(w) {
			continue
		}
		ok, err := r.book(st, h)
		if err != nil {
			return "", err
		}
		if !ok {
			return "room held for " + h.What + ", which named victims there", st.rollback(mark)
		}
	}
	return "", st.rollback(mark)
}

// ownsHold reports whether a nomination in force holds room for w.
func (r *run) ownsHold(w Workload) bool {
	return slices.ContainsFunc(r.holds, func(h *hold) bool { return h.owns(w) })
}

// settle updates the nominations in force once ws (a workload, or a gang's
// members) were served: placed at nodes, they use up their own and may
// have taken the room of lower priorities, which then holds only if it
// still fits; not placed, theirs ends unless they await victims, and a new
// plan (the outcome's) replaces it.
func (r *run) settle(ws []Workload, placed bool, nodes []int, plan []Nominee, victims []Victim) error {
	if len(r.holds) == 0 && len(plan) == 0 {
		return nil
	}
	awaiting := slices.ContainsFunc(ws, func(w Workload) bool { return w.AwaitingVictims })
	if placed || !awaiting || len(plan) > 0 {
		for _, h := range slices.Clone(r.holds) {
			if h.owns(ws[0]) {
				r.dropHold(h)
			}
		}
	}
	if len(plan) > 0 {
		h := newHold(Nomination{What: ws[0].ID, For: plan})
		if h.gang != "" {
			h.What = "gang " + h.gang
		}
		if r.victimOf == nil {
			r.victimOf = map[string]*hold{}
		}
		for _, v := range victims {
			h.Victims = append(h.Victims, v.ID)
			r.victimOf[v.ID] = h
		}
		r.addHold(h)
		nodes = append(nodes, slices.Collect(maps.Keys(h.nodes))...)
	}
	if !placed && len(plan) == 0 {
		return nil
	}
	return r.recheck(ws[0].Priority, nodes)
}

// recheck keeps, of the nominations below priority prio on nodes, those
// whose room still fits beside the ones before them: a workload of priority
// prio may have taken it.
func (r *run) recheck(prio int32, nodes []int) error {
	var hs []*hold
	for _, h := range r.holds {
		if slices.ContainsFunc(nodes, func(n int) bool { return h.nodes[n] }) {
			hs = append(hs, h)
		}
	}
	if !slices.ContainsFunc(hs, func(h *hold) bool { return h.prio < prio }) {
		return nil
	}
	slices.SortStableFunc(hs, func(a, b *hold) int { return cmp.Compare(b.prio, a.prio) }) // the higher first: theirs stays
	st := NewStatement(r.snap.Cluster)
	for _, h := range hs {
		ok, err := r.book(st, h)
		if err != nil {
			return err
		}
		if !ok {
			r.dropHold(h)
		}
	}
	return st.Discard()
}
