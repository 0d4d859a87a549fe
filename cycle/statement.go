package cycle

import (
	"fmt"

	"github.com/tessera-gpu/tessera/placement"
)

// Statement records the bookings of one step of a cycle on a cluster, so
// that they can be kept (Commit) or undone as a whole (Discard): a gang
// that fits only in part leaves the cluster as it was.
type Statement struct {
	c   *placement.Cluster
	ops []booked
}

type booked struct {
	pod placement.Pod
	dec placement.Decision
	// released: the op freed a running workload's part (Unbook).
	released bool
}

// NewStatement starts an empty statement on c.
func NewStatement(c *placement.Cluster) *Statement { return &Statement{c: c} }

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
