package cycle

import (
	"errors"
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
	// Started is when it started (zero: protected while MinRuntime is set).
	Started time.Time
	// Parts and Decisions are what it holds, as it was placed.
	Parts     []placement.Pod
	Decisions []placement.Decision
	// Stopping: it is already being stopped; it is no candidate.
	Stopping bool
}

// Preemption turns on the preempt and reclaim actions: a workload placed
// alone that fits nowhere may name running workloads whose stopping lets
// it fit on one node (package preemption's rules: a lower priority in its
// own queue, or reclaim of its queue's guarantee from a queue above its
// own).
type Preemption struct {
	// MinRuntime protects workloads that have run less than this.
	MinRuntime time.Duration
	// Now is the time the runtimes are measured at.
	Now time.Time
	// NoReclaim allows priority preemption within a queue only.
	NoReclaim bool
}

// preempt plans the victims that let w fit, on the node where the fewest
// (then the least important) suffice, and charges the plan to the ledger:
// w's queue as if w ran, the victims' queues without them. It changes no
// booking: the victims must stop before w can be placed.
func (r *run) preempt(w Workload, ledger *queueing.Ledger) (node int, victims []Victim, err error) {
	pe := r.snap.Preemption
	rules := preemption.Rules{MinRuntime: pe.MinRuntime}
	if !pe.NoReclaim {
		rules.Fair = &preemption.Fairness{Tree: r.tree, Ledger: ledger}
	}
	need := Resources(w.Parts)
	waiting := preemption.Waiting{Queue: w.Queue, Priority: w.Priority, Need: need}
	perNode, surplus := r.candidates()
	var best *preemption.Plan
	st := NewStatement(r.snap.Cluster)
	for ni := range r.snap.Cluster.Nodes {
		eligible := rules.Eligible(waiting, r.notEvicting(perNode[ni]), pe.Now)
		if len(eligible) == 0 || (w.Exclude != nil && w.Exclude(ni) != "") {
			continue
		}
		var failed error
		release := func(c preemption.Candidate) error {
			run := r.running[c.ID]
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
			return ok
		}
		vs, ok := preemption.Victims(eligible, surplus, release, fits)
		if err := st.Discard(); err != nil {
			return -1, nil, err
		}
		if failed != nil {
			return -1, nil, failed
		}
		if ok && (best == nil || preemption.Better(preemption.Plan{Node: ni, Victims: vs}, *best)) {
			best = &preemption.Plan{Node: ni, Victims: vs}
		}
	}
	if best == nil {
		return -1, nil, nil
	}
	for _, v := range best.Victims { // the rule each one falls under, before the plan is charged
		victims = append(victims, Victim{ID: v.ID, Kind: rules.Why(waiting, v, pe.Now)})
	}
	ledger.Charge(w.Queue, need)
	for _, v := range best.Victims {
		r.evicting[v.ID] = true
		run := r.running[v.ID]
		ledger.Release(run.Queue, Resources(run.Parts))
	}
	return best.Node, victims, nil
}

// candidates are the running workloads that may be stopped, by node (not
// Stopping, placed), and each gang's running members above its minimum;
// worked out once per run (the running set does not change within a run:
// victims named are left out by notEvicting, and a gang's surplus counts
// its members as they were, as preemption.Victims keeps it).
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
		r.perNode[n] = append(r.perNode[n], preemption.Candidate{ID: run.ID, Queue: run.Queue, Priority: run.Priority, Started: run.Started, Group: run.Gang})
	}
	r.surplus = preemption.Surplus(members)
	return r.perNode, r.surplus
}

// notEvicting is cands less the workloads already named victims in this
// run (a workload is never named twice).
func (r *run) notEvicting(cands []preemption.Candidate) []preemption.Candidate {
	if len(r.evicting) == 0 {
		return cands
	}
	out := make([]preemption.Candidate, 0, len(cands))
	for _, c := range cands {
		if !r.evicting[c.ID] {
			out = append(out, c)
		}
	}
	return out
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
	return fits, st.rollback(mark)
}
