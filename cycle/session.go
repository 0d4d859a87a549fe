package cycle

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Workload is one unit a front door asks to place: a pod (its containers)
// or a host job.
type Workload struct {
	// ID names it uniquely in the snapshot (a pod's namespace/name, a job ID).
	ID string
	// Queue is its queue; "" is the default queue.
	Queue string
	// Priority orders preemption within its queue (higher may stop lower).
	Priority int32
	// Gang is the key of its gang (Snapshot.Gangs); "" when it is placed alone.
	Gang string
	// Parts are what the engine places, in order: the first carries the
	// workload's host CPU and memory and chooses the node; the others (a
	// pod's further GPU containers) go on the same node. At least one.
	Parts []placement.Pod
	// Policy places it; nil means the snapshot's.
	Policy placement.Policy
	// Exclude, when set, rules nodes out before the engine looks (node
	// selectors, taints, sharing modes, reservations): it returns why node
	// i of the snapshot's cluster cannot take the workload, or "".
	Exclude func(node int) string
	// PreemptExclude, when set, replaces Exclude where victims are looked
	// for: the nodes no stopping of workloads there could open (Exclude
	// also rules out what stopping some could resolve, a port or a
	// device they hold, an anti-affinity they trip).
	PreemptExclude func(node int) string
	// AwaitingVictims: it named victims in an earlier cycle and waits for
	// them to stop; it names no more until the caller clears this.
	AwaitingVictims bool
	// Reserver, when set, holds what the engine does not place (a pod's
	// DRA claims, its volumes) once the cycle has placed the parts.
	Reserver Reserver
}

// Reserver holds, for a workload a cycle places, what the engine does not
// place itself, inside the cycle's step: a gang whose members do not all
// fit gives back its members' holds with their bookings (Statement), as
// kube-scheduler's Reserve and Unreserve extension points do. Only real
// steps call it, never the what-if placements of preemption and
// reservations.
type Reserver interface {
	// Reserve is called once w's parts are booked at decisions (nodes
	// indexed in the snapshot's cluster). why, when not "", rules that node
	// out for w (the cycle places w again elsewhere and counts why among
	// the rejections); an error refuses w itself (Invalid, the error in
	// Outcome.Err). Nothing is held when either is returned.
	Reserve(w *Workload, decisions []placement.Decision) (why string, err error)
	// Unreserve gives back what a successful Reserve held, when the step
	// that placed w is discarded.
	Unreserve(w *Workload, decisions []placement.Decision)
}

// VictimChecker is implemented by a Reserver that holds w to constraints
// the engine does not model and whose verdict stopping workloads changes
// (kube-scheduler's filter plugins): where victims are looked for, a node
// where w's parts fit once the victims stop is taken only when
// FitsWithout says "" for those victims there (their workload IDs), so
// that no workload is stopped for room its stopping does not give.
type VictimChecker interface {
	FitsWithout(w *Workload, node int, victims []string) (why string, err error)
}

// Gang is a group of workloads placed all or nothing.
type Gang struct {
	// MinMember is how many members must run before any may start.
	MinMember int
	// Running counts the members placed in earlier cycles.
	Running int
}

// Snapshot is what a cycle decides from.
type Snapshot struct {
	// Cluster is the free capacity with running work booked; the session
	// books what it places onto it.
	Cluster *placement.Cluster
	// Policy places workloads that name none.
	Policy placement.Policy
	// Queues is the queue tree; nil means the default queue only.
	Queues *queueing.Tree
	// Usage is what running work uses, by queue.
	Usage map[string]queueing.Resources
	// Capacity is the cluster's total capacity, for fair shares, where the
	// caller keeps it; zero means summed from Cluster each Run.
	Capacity queueing.Resources
	// Pending are the workloads to place, each queue's in the order it
	// serves them (priority, then arrival). A gang is served at its first
	// member's place.
	Pending []Workload
	// Gangs are the gangs pending and running workloads name, by key.
	Gangs map[string]Gang
	// Running are the workloads holding resources (already booked in
	// Cluster): the candidates of preemption and reclaim. When Usage is
	// nil, the queues' usage is what they hold.
	Running []Running
	// Preemption, when set, lets workloads that fit nowhere name victims.
	Preemption *Preemption
	// Strict serves Pending in the order given, across queues (the caller
	// ordered them), and stops at the first workload not placed, after its
	// preemption plan: no workload overtakes one that waits (the host
	// daemon's rule). The rest are Behind.
	Strict bool
	// Reservation, when set, holds nodes for a long-waiting workload or
	// gang: the others backfill around it.
	Reservation *Reservation
	// Nominations hold the room of the workloads that named victims in
	// earlier cycles, until they are placed (Nomination), in the order
	// their rooms are put in force (the higher priority first).
	Nominations []Nomination
}

// Status is what became of a workload in a cycle.
type Status int

const (
	// Placed: Decisions say where each part goes.
	Placed Status = iota
	// NoFit: no node can take it now.
	NoFit
	// QueueLimit: its queue, or an ancestor, would go over its hard limit.
	QueueLimit
	// GangWaiting: its gang has fewer members than its minimum.
	GangWaiting
	// GangMisfit: its gang's minimum does not fit together.
	GangMisfit
	// Invalid: the workload cannot be placed as written (an unknown queue
	// or gang, no parts); waiting does not help.
	Invalid
	// Behind: a Strict cycle stopped at an earlier workload that waits.
	Behind
)

func (s Status) String() string {
	switch s {
	case Placed:
		return "placed"
	case NoFit:
		return "no-fit"
	case QueueLimit:
		return "queue-limit"
	case GangWaiting:
		return "gang-waiting"
	case GangMisfit:
		return "gang-misfit"
	case Invalid:
		return "invalid"
	case Behind:
		return "behind"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Outcome is what a cycle decided for one workload.
type Outcome struct {
	// Workload is the workload's ID.
	Workload string
	// Status says whether it was placed and, if not, why it waits.
	Status Status
	// Decisions are its parts' placements (Placed only), nodes indexed in
	// the snapshot's cluster.
	Decisions []placement.Decision
	// Message says why it waits, in the engine's words.
	Message string
	// Err is, for a workload its Reserver refused, the Reserver's error.
	Err error
	// Rejections count, for a workload no node took, the nodes that turned
	// it down by reason (the first check each failed).
	Rejections map[string]int
	// Victims are, for a workload that fits nowhere now, the running
	// workloads whose stopping lets it fit on node Node (preemption; its
	// queue is charged as if it ran). For a gang that does not fit, the
	// first member's outcome (GangMisfit) carries the victims that let
	// the members still needed fit together, on one node or several
	// (each Victim names its node). Empty otherwise.
	Victims []Victim
	// Node is the node the victims free, for a gang the first one
	// (meaningful only with Victims).
	Node int
	// Plan is, for a workload that names victims (a gang's first member),
	// where it goes once they stop: itself on Node, or each of the gang's
	// members its plan places, those that fit as the cluster stands
	// included. A caller nominates it (Snapshot.Nominations) to hold that
	// room in later cycles; the rest of this run holds it already.
	Plan []Nominee
	// Protected are, for a workload placed alone that fits nowhere and
	// names no victims only because Preemption.MinRuntime protects them,
	// the victims it would name without that protection (a front door
	// says they could be preempted once they have run long enough).
	Protected []Victim
}

// Victim is a running workload to stop for a waiting one.
type Victim struct {
	// ID is the Running workload's ID.
	ID string
	// Kind says which rule allows it: preemption by priority within a
	// queue, reclaim of a queue's guarantee, or an idle holder reclaimed.
	Kind preemption.Kind
	// Node is the node its stopping frees for the waiting workload.
	Node int
}

// Run runs one cycle: it serves the pending workloads queue by queue in
// fair-share order and returns one outcome per workload, in the order they
// were served. The snapshot's cluster ends with every placement booked.
// An error means a bug (a policy's decision that does not apply): the
// cluster is then in an unknown state.
func Run(s Snapshot) ([]Outcome, error) {
	tree := s.Queues
	if tree == nil {
		var err error
		if tree, err = queueing.NewTree(nil); err != nil {
			return nil, fmt.Errorf("default queue tree: %w", err)
		}
	}
	r := &run{snap: s, tree: tree, misfit: map[string]misfit{}, evicting: map[string]bool{}}
	if err := r.nominate(); err != nil {
		return nil, err
	}
	usage := s.Usage
	if usage == nil {
		usage = map[string]queueing.Resources{}
	}
	if s.Usage == nil {
		for i := range s.Running {
			run := &s.Running[i]
			q := queueing.QueueOr(run.Queue)
			usage[q] = usage[q].Add(Resources(run.Parts))
		}
	}
	capacity := s.Capacity
	if capacity == (queueing.Resources{}) {
		capacity = Capacity(s.Cluster)
	}
	ledger := tree.NewLedger(capacity, usage)
	byQueue := map[string][]item{}
	type at struct {
		queue string
		i     int
	}
	gangAt := map[string]at{} // a gang is served in its first member's queue
	var strictOrder []at      // every item, in the pending order
	for _, w := range s.Pending {
		q := queueing.QueueOr(w.Queue)
		if _, ok := tree.Queue(q); !ok {
			r.out = append(r.out, Outcome{Workload: w.ID, Status: Invalid, Message: fmt.Sprintf("queue %q does not exist", q)})
			continue
		}
		if w.Gang != "" {
			if a, ok := gangAt[w.Gang]; ok {
				byQueue[a.queue][a.i].members = append(byQueue[a.queue][a.i].members, w)
				continue
			}
			gangAt[w.Gang] = at{q, len(byQueue[q])}
		}
		byQueue[q] = append(byQueue[q], item{gang: w.Gang, members: []Workload{w}})
		strictOrder = append(strictOrder, at{q, len(byQueue[q]) - 1})
	}
	var failed error
	serve := func(q string, it item) (queueing.Resources, bool) {
		var need queueing.Resources
		for _, w := range it.members {
			need = need.Add(Resources(w.Parts))
		}
		if err := ledger.Admit(q, need); err != nil {
			r.waitAll(it.members, QueueLimit, err.Error())
			return queueing.Resources{}, false
		}
		var charge queueing.Resources
		var err error
		if it.gang == "" {
			charge, err = r.single(it.members[0], ledger)
		} else {
			charge, err = r.gang(it.gang, it.members, ledger)
		}
		if err != nil {
			failed = err
			return queueing.Resources{}, true
		}
		return charge, false
	}
	if !s.Strict {
		queueing.Serve(ledger, byQueue, serve)
		return r.out, failed
	}
	// Strict: the caller's order across queues; the first item not placed
	// holds up the rest.
	for i, a := range strictOrder {
		served := len(r.out)
		charge, stop := serve(a.queue, byQueue[a.queue][a.i])
		ledger.Charge(a.queue, charge)
		if stop {
			return r.out, failed
		}
		for _, o := range r.out[served:] {
			if o.Status == Placed {
				continue
			}
			for _, rest := range strictOrder[i+1:] {
				r.waitAll(byQueue[rest.queue][rest.i].members, Behind, "behind "+o.Workload+", which waits (strict order: no workload overtakes one that waits)")
			}
			return r.out, failed
		}
	}
	return r.out, failed
}

// misfit is a memo entry: a workload's outcome, and the holds ended and
// its queue's releases then.
type misfit struct {
	o                    Outcome
	holdsEnded, released int
}

// knownNoPlan reports whether an equal workload (key, "" for none) found
// no victims this run, and nothing since could give w some.
func (r *run) knownNoPlan(key string, w Workload) bool {
	if key == "" {
		return false
	}
	m, ok := r.noPlan[key+"@"+w.Queue]
	return ok && m.holdsEnded == r.holdsEnded && m.released == r.released[queueing.QueueOr(w.Queue)]
}

// item is one unit of a queue: a workload, or a gang's pending members.
type item struct {
	gang    string
	members []Workload
}

type run struct {
	snap Snapshot
	tree *queueing.Tree
	out  []Outcome
	// misfit remembers, by request and priority, the workloads placed
	// alone that fit nowhere this cycle: the cluster only fills up within
	// a cycle, and the room held for others only grows until a hold ends
	// (holdsEnded counts those), so an equal request of the same priority
	// later in the cycle fits nowhere either.
	misfit     map[string]misfit
	holdsEnded int
	// noPlan remembers, by request, priority and queue, the workloads
	// whose preemption search found no victims (nor protected ones): the
	// candidates and the room only shrink within a run, so an equal one
	// finds none either until a hold ends or its queue is released of
	// victims (released counts those, by queue).
	noPlan   map[string]misfit
	released map[string]int
	// running are the snapshot's running workloads by ID, indexed on
	// first use (runningByID: only preemption looks them up); evicting
	// those named victims this cycle (never named twice).
	running  map[string]*Running
	evicting map[string]bool
	// perNode and surplus are the preemption candidates by node and the
	// gangs' surplus, worked out on first use (candidates).
	perNode map[int][]preemption.Candidate
	surplus map[string]int
	// lowest is each queue's lowest candidate priority (candidates);
	// idleHolders: some candidate is an idle holder of a queue that
	// reclaims them.
	lowest      map[string]int32
	idleHolders bool
	// refusedByHold: the last placement saw a Reserver refuse a node.
	refusedByHold bool
	// holds are the nominations in force, in order, heldNodes how many
	// hold each node, and victimOf the nomination that named each victim
	// (never named by another).
	holds     []*hold
	heldNodes map[int]int
	victimOf  map[string]*hold
}

// runningByID returns the snapshot's running workload id (nil if none).
func (r *run) runningByID(id string) *Running {
	if r.running == nil {
		r.running = make(map[string]*Running, len(r.snap.Running))
		for i := range r.snap.Running {
			r.running[r.snap.Running[i].ID] = &r.snap.Running[i]
		}
	}
	return r.running[id]
}

func (r *run) waitAll(ws []Workload, st Status, msg string) {
	for _, w := range ws {
		r.out = append(r.out, Outcome{Workload: w.ID, Status: st, Message: msg})
	}
}

// single places a workload alone and returns what it takes from its
// queue. One that fits nowhere may name victims (preemption).
func (r *run) single(w Workload, ledger *queueing.Ledger) (queueing.Resources, error) {
	key := ""
	var o Outcome
	if w.Exclude == nil && !r.snap.Reservation.holds(w) && !r.ownsHold(w) {
		// A reservation's or a nomination's own workload may fit where
		// an equal request did not: it is left out of the memo.
		key = requestKey(w.Parts) + strconv.Itoa(int(w.Priority)) // the rooms held for others depend on it
	}
	if cached, ok := r.misfit[key]; ok && key != "" && cached.holdsEnded == r.holdsEnded {
		o = cached.o
		o.Workload = w.ID
	} else {
		st := newStep(r.snap.Cluster)
		var err error
		r.refusedByHold = false
		if o, err = r.place(st, w); err != nil {
			return queueing.Resources{}, err
		}
		if o.Status == Placed {
			st.Commit()
			r.out = append(r.out, o)
			return Resources(w.Parts), r.settle([]Workload{w}, true, []int{o.Decisions[0].Node}, nil, nil)
		}
		if key != "" && o.Status == NoFit && !r.refusedByHold {
			// (A node its Reserver refused may serve an equal request.)
			r.misfit[key] = misfit{o: o, holdsEnded: r.holdsEnded}
		}
	}
	if o.Status == NoFit && r.snap.Preemption != nil && !w.AwaitingVictims && !r.knownNoPlan(key, w) {
		node, victims, protected, err := r.preempt(w, ledger)
		if err != nil {
			return queueing.Resources{}, err
		}
		o.Protected = protected
		if len(victims)+len(protected) == 0 && key != "" {
			if r.noPlan == nil {
				r.noPlan = map[string]misfit{}
			}
			r.noPlan[key+"@"+w.Queue] = misfit{holdsEnded: r.holdsEnded, released: r.released[queueing.QueueOr(w.Queue)]}
		}
		if len(victims) > 0 {
			o.Node, o.Victims, o.Plan = node, victims, []Nominee{{Workload: w, Node: node}}
			o.Message += fmt.Sprintf("; stopping %d running workload(s) frees room on %s", len(victims), r.snap.Cluster.Nodes[node].Name)
		}
	}
	r.out = append(r.out, o)
	return queueing.Resources{}, r.settle([]Workload{w}, false, nil, o.Plan, o.Victims)
}

// gang places a gang's pending members all or nothing: together with the
// members already running they must reach the gang's minimum, or none is
// placed and the cluster is left as it was.
func (r *run) gang(key string, members []Workload, ledger *queueing.Ledger) (queueing.Resources, error) {
	g, ok := r.snap.Gangs[key]
	if !ok || g.MinMember < 1 {
		r.waitAll(members, Invalid, fmt.Sprintf("gang %s: no minimum member count is known for it", key))
		return queueing.Resources{}, nil
	}
	need := g.MinMember - g.Running
	if len(members) < need {
		r.waitAll(members, GangWaiting, fmt.Sprintf("gang %s: %d of %d members exist (%d running, %d pending); waiting for the rest",
			key, g.Running+len(members), g.MinMember, g.Running, len(members)))
		return queueing.Resources{}, nil
	}
	st := newStep(r.snap.Cluster)
	outs := make([]Outcome, len(members))
	placed, firstWhy := 0, ""
	for i, w := range members {
		o, err := r.place(st, w) // a member that fits nowhere books nothing
		if err != nil {
			return queueing.Resources{}, err
		}
		outs[i] = o
		if o.Status == Placed {
			placed++
		} else if firstWhy == "" {
			firstWhy = w.ID + ": " + o.Message
		}
	}
	if placed < need {
		if err := st.Discard(); err != nil {
			return queueing.Resources{}, err
		}
		msg := fmt.Sprintf("gang %s: only %d of the %d members still needed fit, so none is placed (all or nothing); first misfit: %s", key, placed, need, firstWhy)
		var victims []Victim
		var plan []Nominee
		node := -1
		if r.snap.Preemption != nil {
			var err error
			if victims, node, plan, err = r.gangPreempt(members, need, ledger); err != nil {
				return queueing.Resources{}, err
			}
			if len(victims) > 0 {
				msg += fmt.Sprintf("; stopping %d running workload(s) frees room for the gang", len(victims))
			}
		}
		for i := range outs {
			outs[i] = Outcome{Workload: members[i].ID, Status: GangMisfit, Message: msg, Rejections: outs[i].Rejections}
		}
		outs[0].Victims, outs[0].Node, outs[0].Plan = victims, node, plan
		r.out = append(r.out, outs...)
		return queueing.Resources{}, r.settle(members, false, nil, plan, victims)
	}
	st.Commit()
	var charge queueing.Resources
	var nodes []int
	for i, o := range outs {
		if o.Status == Placed {
			charge = charge.Add(Resources(members[i].Parts))
			nodes = append(nodes, o.Decisions[0].Node)
		}
	}
	r.out = append(r.out, outs...)
	return charge, r.settle(members, true, nodes, nil, nil)
}

// place books every part of w through st: the first part where the engine
// chooses, the others on the same node. When a later part does not fit
// beside the first, that node is ruled out and the first part placed
// again. A workload that fits nowhere leaves st as it found it.
func (r *run) place(st *Statement, w Workload) (Outcome, error) {
	o := Outcome{Workload: w.ID}
	if len(w.Parts) == 0 {
		o.Status, o.Message = Invalid, "nothing to place (no parts)"
		return o, nil
	}
	pol := w.Policy
	if pol == nil {
		pol = r.snap.Policy
	}
	mark := st.Len()
	var skip map[int]string // nodes ruled out while placing: why
	for {
		view, index, excluded := r.view(st.c, w, skip)
		first := w.Parts[0]
		d, err := pol.Place(view, &first)
		if errors.Is(err, placement.ErrNoFit) {
			o.Status = NoFit
			o.Rejections = rejections(view, &first, excluded)
			o.Message = fmt.Sprintf("no node fits %s: %s", first.Name, Summarize(o.Rejections))
			return o, nil
		}
		if err != nil {
			return o, fmt.Errorf("place %s: %w", first.Name, err)
		}
		node := d.Node
		if index != nil {
			node = index[d.Node]
		}
		d.Node = node
		if err := st.Book(first, d); err != nil {
			return o, fmt.Errorf("policy %s made a decision that does not apply: %w", pol.Name(), err)
		}
		rest, fits, err := bookOn(st, pol, w.Parts[1:], node)
		if err != nil {
			return o, err
		}
		decisions := append([]placement.Decision{d}, rest...)
		why, reserved := notTogether, false
		if fits {
			blocked, err := r.snap.Reservation.blocks(st.c, pol, w, node)
			if err != nil {
				return o, err
			}
			nominated := ""
			if !blocked {
				if nominated, err = r.heldFrom(st, w, node); err != nil {
					return o, err
				}
			}
			if blocked {
				why, reserved = "reserved for "+r.snap.Reservation.What, true
			} else if nominated != "" {
				why = nominated // the room of a workload that named victims here
			} else {
				held, err := st.hold(&w, decisions)
				if err != nil {
					if rerr := st.rollback(mark); rerr != nil {
						return o, rerr
					}
					o.Status, o.Message, o.Err = Invalid, err.Error(), err
					return o, nil
				}
				if held == "" {
					o.Status, o.Decisions = Placed, decisions
					return o, nil
				}
				why = held // the Reserver cannot serve w on this node
				r.refusedByHold = true
			}
		}
		if err := st.rollback(mark); err != nil {
			return o, err
		}
		if skip == nil {
			skip = map[int]string{}
		}
		if !reserved {
			skip[node] = why
			continue
		}
		// Backfill failed on a reserved node: every reserved node is
		// ruled out (the reservation's workloads may need any of them).
		for n := range r.snap.Reservation.Nodes {
			skip[n] = why
		}
	}
}

// Plan decides where w would go on c now, as a cycle does for a workload
// served alone, without booking it: Placed with its decisions, NoFit with
// the nodes' rejections counted per reason, or Invalid. pol places it when
// w names no policy. c is left as it was found.
func Plan(c *placement.Cluster, w Workload, pol placement.Policy) (Outcome, error) {
	r := &run{snap: Snapshot{Cluster: c, Policy: pol}}
	st := NewStatement(c)
	o, err := r.place(st, w)
	if derr := st.Discard(); err == nil {
		err = derr
	}
	return o, err
}

// bookOn places parts one after another on node ni alone, booking each
// through st, and stops at the first that does not fit there (fits false;
// what it booked stays in st for the caller to keep or roll back).
func bookOn(st *Statement, pol placement.Policy, parts []placement.Pod, ni int) (decisions []placement.Decision, fits bool, err error) {
	for i := range parts {
		p := parts[i]
		d, err := pol.Place(&placement.Cluster{Nodes: []placement.Node{st.c.Nodes[ni]}}, &p)
		if errors.Is(err, placement.ErrNoFit) {
			return decisions, false, nil
		}
		if err != nil {
			return decisions, false, fmt.Errorf("place %s: %w", p.Name, err)
		}
		d.Node = ni
		if err := st.Book(p, d); err != nil {
			return decisions, false, fmt.Errorf("policy %s made a decision that does not apply: %w", pol.Name(), err)
		}
		decisions = append(decisions, d)
	}
	return decisions, true, nil
}

// notTogether is why a node that can take a workload's first part but not
// the others beside it is ruled out.
const notTogether = "cannot take all of the workload's parts together"

// view is c restricted to the nodes w may use (not excluded by w, nor in
// skip, which says why), the view's node indexes in c, and the nodes left
// out counted by reason. With nothing left out it is c itself, and the
// indexes are nil when nothing could be (no Exclude, no skip): c's own.
func (r *run) view(c *placement.Cluster, w Workload, skip map[int]string) (*placement.Cluster, []int, map[string]int) {
	if w.Exclude == nil && len(skip) == 0 {
		return c, nil, nil // every node: the cluster itself, indexes as they are
	}
	index := make([]int, 0, len(c.Nodes))
	var excluded map[string]int
	for i := range c.Nodes {
		why := skip[i]
		if why == "" && w.Exclude != nil {
			why = w.Exclude(i)
		}
		if why != "" {
			if excluded == nil {
				excluded = map[string]int{}
			}
			excluded[why]++
			continue
		}
		index = append(index, i)
	}
	if len(index) == len(c.Nodes) {
		return c, index, nil // nothing left out: no copy
	}
	v := &placement.Cluster{Nodes: make([]placement.Node, len(index))}
	for vi, i := range index {
		v.Nodes[vi] = c.Nodes[i]
	}
	return v, index, excluded
}

// rejections counts the nodes of c that cannot take p by reason, with the
// nodes excluded beforehand.
func rejections(c *placement.Cluster, p *placement.Pod, excluded map[string]int) map[string]int {
	out := map[string]int{}
	for why, n := range excluded {
		out[why] += n
	}
	for i := range c.Nodes {
		if rej, ok := placement.Explain(&c.Nodes[i], p); !ok {
			out[rej.Reason]++
		}
	}
	return out
}

// Summarize writes rejection counts most common first: "3 nodes: fewer
// than 2 whole GPUs free; 1 node: insufficient CPU".
func Summarize(rej map[string]int) string {
	if len(rej) == 0 {
		return "the cluster has no nodes"
	}
	reasons := make([]string, 0, len(rej))
	for why := range rej {
		reasons = append(reasons, why)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if rej[reasons[i]] != rej[reasons[j]] {
			return rej[reasons[i]] > rej[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, why := range reasons {
		noun := "nodes"
		if rej[why] == 1 {
			noun = "node"
		}
		parts[i] = fmt.Sprintf("%d %s: %s", rej[why], noun, why)
	}
	return strings.Join(parts, "; ")
}

// requestKey identifies a workload's request for the misfit memo: parts
// that differ only in their names fit in the same places.
func requestKey(parts []placement.Pod) string {
	var b strings.Builder
	for _, p := range parts {
		p.Name = ""
		fmt.Fprintf(&b, "%+v|", p)
	}
	return b.String()
}

// Resources is what parts take from their queue, as a cycle charges it:
// host CPU and memory, GPU compute and GPU memory as requested.
func Resources(parts []placement.Pod) queueing.Resources {
	var r queueing.Resources
	for i := range parts {
		p := &parts[i]
		r.CPUMilli += p.CPUMilli
		r.MemoryMiB += p.MemoryMiB
		r.GPUMilli += p.TotalGPUMilli()
		r.GPUMemoryMiB += int64(p.GPU.Count) * p.GPU.MemoryMiB
	}
	return r
}

// Granted is what part p, placed at d on cluster c, takes from its
// queue while it runs: its host requests, and the GPU compute and memory
// its shares grant (placement.GPUShare: a request's defaults resolved on
// each GPU it got), which is what a front door books from those shares;
// so a workload counts the same whether a cycle assumed it, its front
// door booked it, or a replay runs it. A MIG part counts as Resources.
func Granted(c *placement.Cluster, p placement.Pod, d placement.Decision) queueing.Resources {
	if len(d.MIG) > 0 || p.MIG() || d.Node < 0 || d.Node >= len(c.Nodes) {
		return Resources([]placement.Pod{p})
	}
	r := queueing.Resources{CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB}
	n := &c.Nodes[d.Node]
	for _, pos := range d.GPUs {
		if pos < 0 || pos >= len(n.GPUs) {
			continue
		}
		s := placement.GPUShare(p.GPU, "", n.GPUs[pos].Index, n.GPUs[pos].MemoryMiB)
		r.GPUMilli += s.ComputeMilli
		r.GPUMemoryMiB += s.MemoryMiB
	}
	return r
}

// Capacity is the cluster's capacity for fair shares: every node's CPU
// and memory, a whole GPU's compute and its memory for every GPU the
// snapshot holds (unhealthy ones are not in it). The front doors' fair
// shares read it, so all of them share one.
func Capacity(c *placement.Cluster) queueing.Resources {
	var t queueing.Resources
	for i := range c.Nodes {
		n := &c.Nodes[i]
		t.CPUMilli += n.CPUMilli
		t.MemoryMiB += n.MemoryMiB
		for _, g := range n.GPUs {
			t.GPUMilli += request.Whole
			t.GPUMemoryMiB += g.MemoryMiB
		}
	}
	return t
}
