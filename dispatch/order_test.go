package dispatch

import (
	"testing"
	"time"
)

// TestBindsCarryTheCoresStart: every Bind carries the core's count of its
// binds, in the order it decided them, across cycles, and the books run
// each assumed workload from the cycle's time with that order (what
// preemption orders victims by), so every front door sees the same.
func TestBindsCarryTheCoresStart(t *testing.T) {
	c, frame := booksCore(t, 4)
	type start struct {
		at    time.Time
		order uint64
	}
	want := map[string]start{}
	next := uint64(1)
	for k, ids := range [][]string{{"a", "b"}, {"c"}} {
		at := t0.Add(time.Duration(k) * time.Minute)
		for i, id := range ids {
			c.Add(Item{ID: id, Arrived: t0, Seq: uint64(10*k + i)})
		}
		rd, err := c.Cycle(at, frame)
		if err != nil {
			t.Fatal(err)
		}
		if len(rd.Binds) != len(ids) {
			t.Fatalf("cycle %d bound %v, want %v", k, binds(rd), ids)
		}
		for _, b := range rd.Binds {
			if b.Order != next {
				t.Errorf("bind of %s: order %d, want %d", b.ID, b.Order, next)
			}
			want[b.ID] = start{at, next}
			next++
		}
	}
	for _, r := range c.Books().Running() {
		if w := want[r.ID]; !r.Started.Equal(w.at) || r.Order != w.order {
			t.Errorf("%s runs from %v (order %d), want %v (order %d)", r.ID, r.Started, r.Order, w.at, w.order)
		}
	}
}
