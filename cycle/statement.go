package cycle

import (
	"fmt"

	"github.com/tessera-gpu/tessera/placement"
)

// Statement records the bookings of one step of a cycle on a cluster, and
// what the workloads' Reservers held for them, so that they can be kept
// (Commit) or undone as a whole (Discard): a gang that fits only in part
// leaves the cluster, and its claims and volumes, as they were.
type Statement struct {
	c   *placement.Cluster
	ops []booked
	// hooks: the step is real, so a placed workload's Reserver is called
	// (what-if steps, for preemption and reservations, never call it).
	hooks bool
}

type booked struct {
	pod placement.Pod
	dec placement.Decision
	// released: the op freed a running workload's part (Unbook).
	released bool
	// held: the op is a Reserver's hold for a placed workload (Hold).
	held *Workload
	decs []placement.Decision
}

// NewStatement starts an empty statement on c.
func NewStatement(c *placement.Cluster) *Statement { return &Statement{c: c} }

// newStep starts a statement for a step whose placements are real: it
// calls the Reservers of the workloads it places.
func newStep(c *placement.Cluster) *Statement { return &Statement{c: c, hooks: true} }

// hold asks w's Reserver to hold what w needs beyond its parts on the
// decisions' node, and records the hold so a Discard gives it back. It
// returns why the node cannot serve w ("" when held) or a workload error.
func (s *Statement) hold(w *Workload, decisions []placement.Decision) (string, error) {
	if !s.hooks || w.Reserver == nil {
		return "", nil
	}
	why, err := w.Reserver.Reserve(w, decisions)
	if why != "" || err != nil {
		return why, err
	}
	s.ops = append(s.ops, booked{held: w, decs: decisions})
	return "", nil
}

// Book applies a decision for p to the cluster and records it.
func (s *Statement) Book(p placement.Pod, d placement.Decision) error {
	if err := s.c.Apply(&p, d); err != nil {
		return fmt.Errorf("book %s: %w", p.Name, err)
	}
	s.ops = append(s.ops, booked{pod: p, dec: d})
	return nil
}

// Unbook frees what a running workload's part holds (a what-if eviction)
// and records it, so that a rollback books it again.
func (s *Statement) Unbook(p placement.Pod, d placement.Decision) error {
	if err := s.c.Release(&p, d); err != nil {
		return fmt.Errorf("free %s: %w", p.Name, err)
	}
	s.ops = append(s.ops, booked{pod: p, dec: d, released: true})
	return nil
}

// Len is the number of bookings recorded.
func (s *Statement) Len() int { return len(s.ops) }

// Commit keeps every booking; the statement is empty afterwards.
func (s *Statement) Commit() { s.ops = nil }

// Discard undoes every booking, last first; the statement is empty
// afterwards. A booking that cannot be undone means the cluster was changed
// behind the statement's back, which is a bug: the error says which.
func (s *Statement) Discard() error { return s.rollback(0) }

// rollback undoes the bookings after the first n, last first.
func (s *Statement) rollback(n int) error {
	for i := len(s.ops) - 1; i >= n; i-- {
		op := s.ops[i]
		if op.held != nil {
			op.held.Reserver.Unreserve(op.held, op.decs)
			continue
		}
		undo := s.c.Release
		if op.released {
			undo = s.c.Apply
		}
		if err := undo(&op.pod, op.dec); err != nil {
			s.ops = s.ops[:i]
			return fmt.Errorf("undo the step on %s: %w", op.pod.Name, err)
		}
	}
	s.ops = s.ops[:n]
	return nil
}
