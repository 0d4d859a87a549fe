package queue

import (
	"slices"
	"testing"
	"time"
)

func TestPriorityFIFOOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	items := []Item{
		{ID: "a", Priority: 0, Seq: 1, Submitted: t0},
		{ID: "b", Priority: 5, Seq: 2, Submitted: t0.Add(time.Second)},
		{ID: "c", Priority: 0, Seq: 3, Submitted: t0.Add(2 * time.Second)},
		{ID: "d", Priority: 5, Seq: 4, Submitted: t0.Add(3 * time.Second)},
		{ID: "e", Priority: -1, Seq: 5, Submitted: t0.Add(4 * time.Second), Queue: "batch"},
	}
	tests := []struct {
		name  string
		aging time.Duration
		now   time.Time
		want  []string
	}{
		{"strict priority then fifo", 0, t0.Add(time.Hour), []string{"b", "d", "a", "c", "e"}},
		{"aging not yet effective", time.Minute, t0.Add(4 * time.Second), []string{"b", "d", "a", "c", "e"}},
		{"aging applies equally to equal waits", time.Minute, t0.Add(5*time.Minute + 2*time.Second), []string{"b", "d", "a", "c", "e"}},
		{"empty", time.Minute, t0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := items
			if tt.want == nil {
				in = nil
			}
			got := PriorityFIFO{AgingStep: tt.aging}.Order(in, tt.now)
			var ids []string
			for _, it := range got {
				ids = append(ids, it.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("order = %v, want %v", ids, tt.want)
			}
		})
	}
}

func TestOrderDoesNotModifyInput(t *testing.T) {
	items := []Item{{ID: "a", Seq: 2}, {ID: "b", Seq: 1}}
	PriorityFIFO{}.Order(items, time.Time{})
	if items[0].ID != "a" {
		t.Fatal("Order changed its input")
	}
}

// A stream of newer high-priority jobs never starves an old low-priority one.
func TestAgingPreventsStarvation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := PriorityFIFO{AgingStep: time.Minute}
	old := Item{ID: "old", Priority: 0, Seq: 1, Submitted: t0}
	for minute := 0; minute < 100; minute++ {
		now := t0.Add(time.Duration(minute) * time.Minute)
		fresh := Item{ID: "fresh", Priority: 10, Seq: uint64(minute + 2), Submitted: now}
		if got := p.Order([]Item{fresh, old}, now); got[0].ID == "old" {
			if minute < 10 {
				t.Fatalf("old job first at minute %d, before it aged past priority 10", minute)
			}
			return
		}
	}
	t.Fatal("old job never reached the head of the queue")
}
