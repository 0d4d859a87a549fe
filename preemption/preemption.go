package preemption

import (
	"cmp"
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

// Kind says why a running workload may be stopped for a waiting one.
type Kind int

// Kinds of preemption.
const (
	// NotEligible: the workload may not be stopped.
	NotEligible Kind = iota
	// ByPriority: the victim, in the waiting one's queue, has a lower priority.
	ByPriority
	// ByReclaim: the waiting workload's queue takes back its guarantee
	// from a queue above its own.
	ByReclaim
	// ByIdle: the victim's queue reclaims idle holders (Rules.IdleAfter)
	// and it has held its GPUs idle at least that long.
	ByIdle
)

func (k Kind) String() string {
	switch k {
	case ByPriority:
		return "priority"
	case ByReclaim:
		return "reclaim"
	case ByIdle:
		return "idle"
	}
	return "not eligible"
}

// Waiting is the workload that does not fit.
type Waiting struct {
	Queue    string
	Priority int32
	// Need is what it would take, for the reclaim check.
	Need queueing.Resources
}

// Candidate is a running workload that might be stopped.
type Candidate struct {
	// ID names it for the caller (a pod's namespace/name, a job ID).
	ID       string
	Queue    string
	Priority int32
	// Started is when it started running; zero when it has not, which
	// protects it while a minimum runtime is set.
	Started time.Time
	// Order tells apart candidates started at the same time: the higher
	// started later (a scheduling core's count of its binds; 0: unknown).
	Order uint64
	// Group names its gang ("" when it is in none); see Surplus.
	Group string
	// IdleSince is when it became an idle holder (its GPUs' compute near
	// zero ever since); zero: it is not one.
	IdleSince time.Time
}

// Rules are the preemption settings of one decision.
type Rules struct {
	// MinRuntime protects workloads that have run less than this (0: none).
	MinRuntime time.Duration
	// Fair enables reclaim across queues; nil allows priority preemption only.
	Fair *Fairness
	// IdleAfter is, per queue, how long a workload of it must be an idle
	// holder before any waiting workload may stop it (ByIdle); nil, or 0
	// for a queue: never.
	IdleAfter func(queue string) time.Duration
}

// RanLongEnough reports whether a workload started at started has run the
// minimum runtime by now; one that has not started has not.
func (r Rules) RanLongEnough(started, now time.Time) bool {
	if r.MinRuntime <= 0 {
		return true
	}
	return !started.IsZero() && now.Sub(started) >= r.MinRuntime
}

// Why says why c may be stopped for w at now, or NotEligible.
func (r Rules) Why(w Waiting, c Candidate, now time.Time) Kind {
	if !r.RanLongEnough(c.Started, now) {
		return NotEligible
	}
	if c.Priority < w.Priority && queueing.QueueOr(c.Queue) == queueing.QueueOr(w.Queue) {
		return ByPriority
	}
	if r.Fair.MayReclaim(w.Queue, w.Need, c.Queue) {
		return ByReclaim
	}
	if r.IdleLongEnough(c, now) {
		return ByIdle
	}
	return NotEligible
}

// IdleLongEnough reports whether c has been an idle holder, by now, at
// least as long as its queue's IdleAfter asks (never when it sets none).
func (r Rules) IdleLongEnough(c Candidate, now time.Time) bool {
	if c.IdleSince.IsZero() || r.IdleAfter == nil {
		return false
	}
	after := r.IdleAfter(c.Queue)
	return after > 0 && now.Sub(c.IdleSince) >= after
}

// Eligible returns the candidates that may be stopped for w, in eviction
// order: lowest priority first, then the most recently started (the least
// work lost; by Order within one start time, so that every front door
// that gives the same starts and orders gets the same victims, whatever
// the order of cands). cands is not modified.
func (r Rules) Eligible(w Waiting, cands []Candidate, now time.Time) []Candidate {
	var out []Candidate
	for _, c := range cands {
		if r.Why(w, c, now) != NotEligible {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if a.Priority != b.Priority {
			if a.Priority < b.Priority {
				return -1
			}
			return 1
		}
		if c := b.Started.Compare(a.Started); c != 0 {
			return c
		}
		return cmp.Compare(b.Order, a.Order)
	})
	return out
}

// Victims takes eligible candidates (in Eligible's order) one by one until
// the waiting workload fits: each taken one is passed to release (which
// frees its resources in the caller's what-if copy), then fits is asked.
// A gang member is skipped when its gang has no surplus left (surplus, from
// Surplus, is not modified). It returns the victims, or false when even
// all of them are not enough or release fails.
func Victims(eligible []Candidate, surplus map[string]int, release func(Candidate) error, fits func() bool) ([]Candidate, bool) {
	taken := map[string]int{}
	var out []Candidate
	for _, c := range eligible {
		if c.Group != "" {
			if taken[c.Group] >= surplus[c.Group] {
				continue // would take the gang below its minimum
			}
			taken[c.Group]++
		}
		if err := release(c); err != nil {
			return nil, false
		}
		out = append(out, c)
		if fits() {
			return out, true
		}
	}
	return nil, false
}

// Member is a running gang member, for Surplus.
type Member struct {
	Group string
	// Min is its gang's minimum member count; negative when unknown.
	Min int
}

// Surplus is, per gang, how many running members exceed its minimum (all
// of them when no member says the minimum).
func Surplus(members []Member) map[string]int {
	running := map[string]int{}
	minimum := map[string]int{}
	for _, m := range members {
		if m.Group == "" {
			continue
		}
		running[m.Group]++
		if m.Min >= 0 {
			minimum[m.Group] = m.Min
		}
	}
	out := map[string]int{}
	for g, n := range running {
		out[g] = max(0, n-minimum[g])
	}
	return out
}

// Plan is a set of victims on one node whose stopping lets the waiting
// workload fit there.
type Plan struct {
	Node    int
	Victims []Candidate
}

// MaxPriority is the highest priority among the victims.
func (p Plan) MaxPriority() int32 {
	var m int32
	for i, v := range p.Victims {
		if i == 0 || v.Priority > m {
			m = v.Priority
		}
	}
	return m
}

// Better reports whether p beats q: fewer victims, then a lower highest
// victim priority. Ties keep q (the earlier node).
func Better(p, q Plan) bool {
	if len(p.Victims) != len(q.Victims) {
		return len(p.Victims) < len(q.Victims)
	}
	return p.MaxPriority() < q.MaxPriority()
}

// Fairness is a scheduling round's queue state, for reclaim.
type Fairness struct {
	Tree   *queueing.Tree
	Ledger *queueing.Ledger
}

// MayReclaim reports whether the waiting workload's queue, taking need
// more, stays within its guaranteed GPU share while the victim's queue
// (another one) is above its own: the waiting queue takes back what it is
// guaranteed. Reclaim looks at GPU compute, and at GPU memory where a queue
// guarantees it. A nil Fairness never reclaims.
func (f *Fairness) MayReclaim(waitingQueue string, need queueing.Resources, victimQueue string) bool {
	if f == nil || f.Tree == nil || f.Ledger == nil {
		return false
	}
	victimQueue, waitingQueue = queueing.QueueOr(victimQueue), queueing.QueueOr(waitingQueue)
	if victimQueue == waitingQueue {
		return false
	}
	wq, ok := f.Tree.Queue(waitingQueue)
	if !ok || wq.Guaranteed.GPUMilli == 0 {
		return false
	}
	after := f.Ledger.Used(waitingQueue).Add(need)
	if after.GPUMilli > wq.Guaranteed.GPUMilli || (wq.Guaranteed.GPUMemoryMiB > 0 && after.GPUMemoryMiB > wq.Guaranteed.GPUMemoryMiB) {
		return false
	}
	vq, ok := f.Tree.Queue(victimQueue)
	if !ok {
		vq, _ = f.Tree.Queue(queueing.DefaultQueue)
	}
	used := f.Ledger.Used(victimQueue)
	return used.GPUMilli > vq.Guaranteed.GPUMilli || (vq.Guaranteed.GPUMemoryMiB > 0 && used.GPUMemoryMiB > vq.Guaranteed.GPUMemoryMiB)
}
