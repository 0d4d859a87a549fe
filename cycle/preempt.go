package cycle

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// Running is a workload holding resources: booked in the snapshot's
// cluster, a candidate victim when preemption is on.
type Running struct {
	ID       string
	Queue    string
	Priority int32
	// Gang is its gang's key ("" for none); a gang is never taken below
	// its minimum (Snapshot.Gangs).
	Gang string
	// Started is when it started (zero: protected while MinRuntime is set);
	// Order tells apart workloads started at the same time, the higher
	// started later (preemption.Candidate.Order).
	Started time.Time
	Order   uint64
	// IdleSince is when it became an idle holder (zero: it is not one), for
	// the queues that reclaim idle holders (queueing.Queue.IdleReclaimAfter).
	IdleSince time.Time
	// Parts and Decisions are what it holds, as it was placed.
	Parts     []placement.Pod
	Decisions []placement.Decision
	// Stopping: it is already being stopped; it is no candidate.
	Stopping bool
}

// Preemption turns on the preempt and reclaim actions: a workload placed
// alone that fits nowhere may name running workloads whose stopping lets
// it fit on one node (package preemption's rules: a lower priority in its
// own queue, reclaim of its queue's guarantee from a queue above its own,
// or an idle holder of a queue that reclaims them).
type Preemption struct {
	// MinRuntime protects workloads that have run less than this.
	MinRuntime time.Duration
	// Now is the time the runtimes are measured at.
	Now time.Time
	// NoReclaim turns off reclaim of guarantees across queues (priority
	// preemption, and idle reclaim where a queue asks for it, remain).
	NoReclaim bool
}

// rules are the preemption rules of the run, with fairness read from
// ledger unless reclaim is off, and each queue's idle-reclaim time.
func (r *run) rules(ledger *queueing.Ledger) preemption.Rules {
	rules := preemption.Rules{MinRuntime: r.snap.Preemption.MinRuntime, IdleAfter: r.tree.IdleReclaimAfter}
	if !r.snap.Preemption.NoReclaim {
		rules.Fair = &preemption.Fairness{Tree: r.tree, Ledger: ledger}
	}
	return rules
}

// preempt plans the victims that let w fit, on the node where the fewest
// (then the least important) suffice, and charges the plan to the ledger:
// w's queue as if w ran, the victims' queues without them. It changes no
// booking: the victims must stop before w can be placed. When MinRuntime
// alone stands in the way, it names no victims and returns as protected
// those it would name without it, charging nothing.
func (r *run) preempt(w Workload, ledger *queueing.Ledger) (node int, victims, protected []Victim, err error) {
	rules := r.rules(ledger)
	best, waiting, err := r.plan(w, rules)
	if err != nil {
		return -1, nil, nil, err
	}
	if best == nil {
		if rules.MinRuntime <= 0 {
			return -1, nil, nil, nil
		}
		rules.MinRuntime = 0
		if best, waiting, err = r.plan(w, rules); err != nil || best == nil {
			return -1, nil, nil, err
		}
		return -1, nil, r.named(best, waiting, rules), nil
	}
	victims = r.named(best, waiting, rules)
	r.charge(w.Queue, waiting.Need, best.Victims, ledger)
	return best.Node, victims, nil, nil
}

// plan finds the best preemption plan for w under rules (nil when no node
// has one); it changes nothing.
func (r *run) plan(w Workload, rules preemption.Rules) (*preemption.Plan, preemption.Waiting, error) {
	waiting := preemption.Waiting{Queue: w.Queue, Priority: w.Priority, Need: Resources(w.Parts)}
	_, surplus := r.candidates()
	if !r.mayName(waiting, rules) {
		return nil, waiting, nil // no node would have an eligible candidate
	}
	st := NewStatement(r.snap.Cluster)
	best, err := r.nodeVictims(st, w, waiting, rules, surplus, nil)
	if derr := st.Discard(); err == nil {
		err = derr
	}
	return best, waiting, err
}

// named is a plan's victims with the rule each one falls under (before
// the plan is charged).
func (r *run) named(p *preemption.Plan, waiting preemption.Waiting, rules preemption.Rules) []Victim {
	out := make([]Victim, 0, len(p.Victims))
	for _, v := range p.Victims {
		out = append(out, Victim{ID: v.ID, Kind: rules.Why(waiting, v, r.snap.Preemption.Now), Node: p.Node})
	}
	return out
}

// nodeVictims finds, on the cluster as st holds it, the node where the
// fewest (then the least important) eligible running workloads let w fit
// once stopped. surplus is how many members of each running gang may
// still be taken; skip names workloads already planned to stop. It leaves
// st as it found it; nil when no node has such victims.
func (r *run) nodeVictims(st *Statement, w Workload, waiting preemption.Waiting, rules preemption.Rules, surplus map[string]int, skip map[string]bool) (*preemption.Plan, error) {
	perNode, _ := r.candidates()
	var best *preemption.Plan
	exclude := w.Exclude
	if w.PreemptExclude != nil {
		exclude = w.PreemptExclude
	}
	checker, _ := w.Reserver.(VictimChecker)
	for ni := range r.snap.Cluster.Nodes {
		if exclude != nil && exclude(ni) != "" {
			continue
		}
		eligible := rules.Eligible(waiting, r.notEvicting(perNode[ni], skip, w), r.snap.Preemption.Now)
		if len(eligible) == 0 {
			continue
		}
		mark := st.Len()
		var failed error
		var released []string
		release := func(c preemption.Candidate) error {
			released = append(released, c.ID)
			run := r.runningByID(c.ID)
			for i := range run.Parts {
				if err := st.Unbook(run.Parts[i], run.Decisions[i]); err != nil {
					failed = err
					return err
				}
			}
			return nil
		}
		fits := func() bool {
			ok, err := r.fitsOn(st, w, ni)
			if err != nil {
				failed = err
			}
			if ok && checker != nil {
				why, err := checker.FitsWithout(&w, ni, released)
				if err != nil {
					failed = err
				}
				ok = why == "" && err == nil
			}
			return ok
		}
		vs, ok := preemption.Victims(eligible, surplus, release, fits)
		if err := st.rollback(mark); err != nil {
			return nil, err
		}
		if failed != nil {
			return nil, failed
		}
		if ok && (best == nil || preemption.Better(preemption.Plan{Node: ni, Victims: vs}, *best)) {
			best = &preemption.Plan{Node: ni, Victims: vs}
		}
	}
	return best, nil
}

// charge books a preemption plan: the waiting queue is charged need as if
// its workload ran, the victims' queues are released of them, the victims
// are never named again this run, and a gang member taken lowers its
// gang's surplus (so two plans of one run never take a gang below its
// minimum together).
func (r *run) charge(queue string, need queueing.Resources, victims []preemption.Candidate, ledger *queueing.Ledger) {
	ledger.Charge(queue, need)
	for _, v := range victims {
		r.evicting[v.ID] = true
		run := r.runningByID(v.ID)
		ledger.Release(run.Queue, Resources(run.Parts))
		if r.released == nil {
			r.released = map[string]int{}
		}
		r.released[queueing.QueueOr(run.Queue)]++ // its workloads may reclaim again (noPlan)
		if v.Group != "" {
			r.surplus[v.Group]--
		}
	}
}

// gangPreempt plans, for a gang whose members still needed do not all
// fit, running workloads to stop so that they do: member by member, each
// is placed where it fits as the cluster stands with the members before
// it booked and the victims before it stopped, or, where it fits nowhere,
// on the node where the fewest victims free room for it. A member that
// fits nowhere even then is left out; the plan holds only when need
// members fit. It charges the plan like preempt and returns the victims
// (each with the node it frees), the first node freed, or none, and where
// the plan puts each member it places. It changes no booking, and plans
// nothing for a gang one of whose members already waits for victims, or
// that needs none.
func (r *run) gangPreempt(members []Workload, need int, ledger *queueing.Ledger) (victims []Victim, node int, at []Nominee, err error) {
	for _, w := range members {
		if w.AwaitingVictims {
			return nil, -1, nil, nil
		}
	}
	rules := r.rules(ledger)
	var needRes queueing.Resources
	for _, w := range members[:need] {
		needRes = needRes.Add(Resources(w.Parts))
	}
	lead := members[0]
	waiting := preemption.Waiting{Queue: lead.Queue, Priority: lead.Priority, Need: needRes}
	_, surplus := r.candidates()
	left := maps.Clone(surplus)
	skip := map[string]bool{}
	var chosen []preemption.Candidate
	node = -1
	st := NewStatement(r.snap.Cluster)
	placed := 0
	plan := func() error {
		for _, w := range members {
			if placed == need {
				return nil
			}
			o, err := r.place(st, w)
			if err != nil {
				return err
			}
			if o.Status == Placed {
				placed++
				at = append(at, Nominee{Workload: w, Node: o.Decisions[0].Node})
				continue
			}
			best, err := r.nodeVictims(st, w, waiting, rules, left, skip)
			if err != nil {
				return err
			}
			if best == nil {
				continue
			}
			for _, v := range best.Victims {
				run := r.runningByID(v.ID)
				for i := range run.Parts {
					if err := st.Unbook(run.Parts[i], run.Decisions[i]); err != nil {
						return err
					}
				}
				skip[v.ID] = true
				if v.Group != "" {
					left[v.Group]--
				}
				chosen = append(chosen, v)
				victims = append(victims, Victim{ID: v.ID, Kind: rules.Why(waiting, v, r.snap.Preemption.Now), Node: best.Node})
			}
			pol := w.Policy
			if pol == nil {
				pol = r.snap.Policy
			}
			if _, fits, err := bookOn(st, pol, w.Parts, best.Node); err != nil {
				return err
			} else if !fits {
				return fmt.Errorf("gang member %s does not fit on node %d once its victims stop, though the plan said it would", w.ID, best.Node)
			}
			if node < 0 {
				node = best.Node
			}
			at = append(at, Nominee{Workload: w, Node: best.Node})
			placed++
		}
		return nil
	}
	err = plan()
	if derr := st.Discard(); err == nil {
		err = derr
	}
	if err != nil || placed < need || len(chosen) == 0 {
		return nil, -1, nil, err
	}
	r.charge(lead.Queue, needRes, chosen, ledger)
	return victims, node, at, nil
}

// candidates are the running workloads that may be stopped, by node (not
// Stopping, placed), and each gang's running members above its minimum;
// worked out once per run (the running set does not change within a run:
// victims named are left out by notEvicting, and a gang's surplus goes
// down as plans take its members: charge).
func (r *run) candidates() (map[int][]preemption.Candidate, map[string]int) {
	if r.perNode != nil {
		return r.perNode, r.surplus
	}
	r.perNode = map[int][]preemption.Candidate{}
	var members []preemption.Member
	for i := range r.snap.Running {
		run := &r.snap.Running[i]
		if run.Gang != "" {
			m := preemption.Member{Group: run.Gang, Min: -1}
			if g, ok := r.snap.Gangs[run.Gang]; ok {
				m.Min = g.MinMember
			}
			members = append(members, m)
		}
		if run.Stopping || len(run.Decisions) == 0 {
			continue
		}
		n := run.Decisions[0].Node
		r.perNode[n] = append(r.perNode[n], preemption.Candidate{ID: run.ID, Queue: run.Queue, Priority: run.Priority, Started: run.Started, Order: run.Order, Group: run.Gang, IdleSince: run.IdleSince})
		if !run.IdleSince.IsZero() && r.tree.IdleReclaimAfter(run.Queue) > 0 {
			r.idleHolders = true
		}
		q := queueing.QueueOr(run.Queue)
		if p, ok := r.lowest[q]; !ok || run.Priority < p {
			if r.lowest == nil {
				r.lowest = map[string]int32{}
			}
			r.lowest[q] = run.Priority
		}
	}
	r.surplus = preemption.Surplus(members)
	return r.perNode, r.surplus
}

// mayName reports whether any candidate could be eligible for waiting by
// the rules' queue and priority tests alone, or as an idle holder of a
// queue that reclaims them (not its runtime, node, idle time or being
// named already): when none could, the search over the nodes is spared.
// It changes no outcome.
func (r *run) mayName(waiting preemption.Waiting, rules preemption.Rules) bool {
	if r.idleHolders && rules.IdleAfter != nil {
		return true
	}
	own := queueing.QueueOr(waiting.Queue)
	for q, low := range r.lowest {
		if q == own {
			if low < waiting.Priority {
				return true
			}
		} else if rules.Fair.MayReclaim(waiting.Queue, waiting.Need, q) {
			return true
		}
	}
	return false
}

// notEvicting is cands less the workloads already named victims in this
// run (a workload is never named twice), those in skip, the members of w's
// gang (a gang never stops its own members to place others), and the
// victims a nomination named for another than w (w may name its own again:
// its caller lets it once its wait for them is over).
func (r *run) notEvicting(cands []preemption.Candidate, skip map[string]bool, w Workload) []preemption.Candidate {
	if len(r.evicting) == 0 && len(skip) == 0 && w.Gang == "" && !r.nominatedAmong(cands, w) {
		return cands
	}
	out := make([]preemption.Candidate, 0, len(cands))
	for _, c := range cands {
		if h := r.victimOf[c.ID]; h != nil && !h.owns(w) {
			continue
		}
		if !r.evicting[c.ID] && !skip[c.ID] && (w.Gang == "" || c.Group != w.Gang) {
			out = append(out, c)
		}
	}
	return out
}

// nominatedAmong reports whether cands hold a victim a nomination named for
// another than w.
func (r *run) nominatedAmong(cands []preemption.Candidate, w Workload) bool {
	if len(r.victimOf) == 0 {
		return false
	}
	for _, c := range cands {
		if h := r.victimOf[c.ID]; h != nil && !h.owns(w) {
			return true
		}
	}
	return false
}

// fitsOn reports whether every part of w fits on node ni as the cluster
// stands in st; it leaves st as it found it.
func (r *run) fitsOn(st *Statement, w Workload, ni int) (bool, error) {
	pol := w.Policy
	if pol == nil {
		pol = r.snap.Policy
	}
	mark := st.Len()
	_, fits, err := bookOn(st, pol, w.Parts, ni)
	if err != nil {
		return false, errors.Join(err, st.rollback(mark))
	}
	if fits {
		// The room a nomination of w's priority or above holds there is
		// not w's to free victims into.
		why, err := r.heldFrom(st, w, ni)
		if err != nil {
			return false, errors.Join(err, st.rollback(mark))
		}
		fits = why == ""
	}
	return fits, st.rollback(mark)
}
