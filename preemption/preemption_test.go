package preemption

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func gpus(n int64) queueing.Resources { return queueing.Resources{GPUMilli: n * 1000} }

func fairness(t *testing.T, queues []queueing.Queue, used map[string]queueing.Resources) *Fairness {
	t.Helper()
	tree, err := queueing.NewTree(queues)
	if err != nil {
		t.Fatal(err)
	}
	return &Fairness{Tree: tree, Ledger: tree.NewLedger(gpus(8), used)}
}

func TestWhy(t *testing.T) {
	fair := fairness(t, []queueing.Queue{
		{Name: "owner", Guaranteed: gpus(2)},
		{Name: "borrower"},
		{Name: "poor", Guaranteed: gpus(4)},
	}, map[string]queueing.Resources{"owner": gpus(1), "borrower": gpus(3), "poor": gpus(2)})
	started := t0.Add(-time.Hour)
	// Queue "notebooks" reclaims idle holders after 2h; the others never.
	idle := func(q string) time.Duration {
		if q == "notebooks" {
			return 2 * time.Hour
		}
		return 0
	}
	idleFor := func(d time.Duration) time.Time { return t0.Add(-d) }
	tests := []struct {
		name  string
		rules Rules
		w     Waiting
		c     Candidate
		want  Kind
	}{
		{"lower priority", Rules{}, Waiting{Priority: 10}, Candidate{Priority: 5, Started: started}, ByPriority},
		{"equal priority", Rules{}, Waiting{Priority: 10}, Candidate{Priority: 10, Started: started}, NotEligible},
		{"higher priority", Rules{}, Waiting{Priority: 1}, Candidate{Priority: 5, Started: started}, NotEligible},
		{"lower priority, other queue", Rules{}, Waiting{Queue: "a", Priority: 10}, Candidate{Queue: "b", Priority: 5, Started: started}, NotEligible},
		{"lower priority, default queue named or not", Rules{}, Waiting{Queue: "default", Priority: 10}, Candidate{Priority: 5, Started: started}, ByPriority},
		{"lower priority in another queue, by reclaim", Rules{Fair: fair}, Waiting{Queue: "owner", Priority: 10, Need: gpus(1)}, Candidate{Queue: "borrower", Priority: 5, Started: started}, ByReclaim},
		{"inside the minimum runtime", Rules{MinRuntime: 2 * time.Hour}, Waiting{Priority: 10}, Candidate{Priority: 5, Started: started}, NotEligible},
		{"past the minimum runtime", Rules{MinRuntime: time.Hour}, Waiting{Priority: 10}, Candidate{Priority: 5, Started: started}, ByPriority},
		{"not started, with a minimum runtime", Rules{MinRuntime: time.Second}, Waiting{Priority: 10}, Candidate{Priority: 5}, NotEligible},
		{"not started, no minimum runtime", Rules{}, Waiting{Priority: 10}, Candidate{Priority: 5}, ByPriority},
		{"reclaim from a queue above its guarantee", Rules{Fair: fair}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "borrower", Priority: 100, Started: started}, ByReclaim},
		{"no reclaim without fairness", Rules{}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "borrower", Priority: 100, Started: started}, NotEligible},
		{"no reclaim beyond the guarantee", Rules{Fair: fair}, Waiting{Queue: "owner", Need: gpus(2)}, Candidate{Queue: "borrower", Started: started}, NotEligible},
		{"no reclaim from a queue within its guarantee", Rules{Fair: fair}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "poor", Started: started}, NotEligible},
		{"no reclaim within one queue", Rules{Fair: fair}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "owner", Started: started}, NotEligible},
		{"no reclaim for a queue without a guarantee", Rules{Fair: fair}, Waiting{Queue: "borrower", Need: gpus(1)}, Candidate{Queue: "owner", Started: started}, NotEligible},
		{"reclaim respects the minimum runtime", Rules{Fair: fair, MinRuntime: 2 * time.Hour}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "borrower", Started: started}, NotEligible},
		{"idle past its queue's time, any waiting workload", Rules{IdleAfter: idle}, Waiting{Queue: "other", Priority: -5}, Candidate{Queue: "notebooks", Priority: 100, Started: started, IdleSince: idleFor(2 * time.Hour)}, ByIdle},
		{"idle, not yet its queue's time", Rules{IdleAfter: idle}, Waiting{Queue: "other"}, Candidate{Queue: "notebooks", Started: started, IdleSince: idleFor(2*time.Hour - time.Second)}, NotEligible},
		{"idle long, queue without the setting", Rules{IdleAfter: idle}, Waiting{Queue: "other"}, Candidate{Queue: "batch", Started: started, IdleSince: idleFor(100 * time.Hour)}, NotEligible},
		{"idle long, setting off (nil)", Rules{}, Waiting{Queue: "other"}, Candidate{Queue: "notebooks", Started: started, IdleSince: idleFor(100 * time.Hour)}, NotEligible},
		{"not idle, queue with the setting", Rules{IdleAfter: idle}, Waiting{Queue: "other"}, Candidate{Queue: "notebooks", Started: started}, NotEligible},
		{"idle respects the minimum runtime", Rules{IdleAfter: idle, MinRuntime: 6 * time.Hour}, Waiting{Queue: "other"}, Candidate{Queue: "notebooks", Started: t0.Add(-5 * time.Hour), IdleSince: idleFor(3 * time.Hour)}, NotEligible},
		{"priority before idle", Rules{IdleAfter: idle}, Waiting{Queue: "notebooks", Priority: 10}, Candidate{Queue: "notebooks", Priority: 5, Started: started, IdleSince: idleFor(3 * time.Hour)}, ByPriority},
		{"reclaim before idle", Rules{Fair: fair, IdleAfter: func(string) time.Duration { return time.Hour }}, Waiting{Queue: "owner", Need: gpus(1)}, Candidate{Queue: "borrower", Started: started, IdleSince: idleFor(3 * time.Hour)}, ByReclaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rules.Why(tt.w, tt.c, t0); got != tt.want {
				t.Errorf("Why = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMayReclaimGPUMemory(t *testing.T) {
	mem := func(g, m int64) queueing.Resources { return queueing.Resources{GPUMilli: g * 1000, GPUMemoryMiB: m} }
	fair := fairness(t, []queueing.Queue{
		{Name: "owner", Guaranteed: mem(2, 1000)},
		{Name: "borrower", Guaranteed: mem(4, 500)},
	}, map[string]queueing.Resources{"borrower": mem(1, 800)})
	if !fair.MayReclaim("owner", mem(1, 500), "borrower") {
		t.Error("borrower is over its memory guarantee: owner may reclaim")
	}
	if fair.MayReclaim("owner", mem(1, 1500), "borrower") {
		t.Error("owner would exceed its memory guarantee")
	}
	if (*Fairness)(nil).MayReclaim("owner", mem(1, 1), "borrower") {
		t.Error("nil fairness reclaimed")
	}
}

func ids(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestEligibleOrder(t *testing.T) {
	cands := []Candidate{
		{ID: "old-low", Priority: 1, Started: t0.Add(-3 * time.Hour)},
		{ID: "new-low", Priority: 1, Started: t0.Add(-1 * time.Hour)},
		{ID: "mid", Priority: 5, Started: t0.Add(-2 * time.Hour)},
		{ID: "peer", Priority: 10, Started: t0.Add(-2 * time.Hour)},
		{ID: "fresh", Priority: 0, Started: t0.Add(-time.Minute)},
	}
	got := ids(Rules{MinRuntime: 10 * time.Minute}.Eligible(Waiting{Priority: 10}, cands, t0))
	if want := []string{"new-low", "old-low", "mid"}; !slices.Equal(got, want) {
		t.Errorf("Eligible = %v, want %v (lowest priority, newest first; peer and fresh protected)", got, want)
	}
	if cands[0].ID != "old-low" {
		t.Error("Eligible reordered its input")
	}
}

// TestEligibleOrderTies: candidates of one priority started at the same
// time come in one order, the later bound (higher Order) first, whatever
// the order they are given in.
func TestEligibleOrderTies(t *testing.T) {
	cands := []Candidate{
		{ID: "b1", Started: t0, Order: 1},
		{ID: "b3", Started: t0, Order: 3},
		{ID: "older", Started: t0.Add(-time.Minute), Order: 9},
		{ID: "b2", Started: t0, Order: 2},
	}
	want := []string{"b3", "b2", "b1", "older"}
	for i := range cands {
		rotated := append(slices.Clone(cands[i:]), cands[:i]...)
		if got := ids(Rules{}.Eligible(Waiting{Priority: 1}, rotated, t0)); !slices.Equal(got, want) {
			t.Errorf("Eligible(%v) = %v, want %v", ids(rotated), got, want)
		}
	}
}

func TestVictims(t *testing.T) {
	cands := []Candidate{{ID: "a"}, {ID: "g1", Group: "g"}, {ID: "g2", Group: "g"}, {ID: "b"}, {ID: "c"}}
	tests := []struct {
		name    string
		surplus map[string]int
		needed  int // victims released before it fits
		want    []string
		ok      bool
	}{
		{"first is enough", nil, 1, []string{"a"}, true},
		{"gang without surplus is skipped", nil, 2, []string{"a", "b"}, true},
		{"gang surplus of one", map[string]int{"g": 1}, 3, []string{"a", "g1", "b"}, true},
		{"not enough", nil, 5, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			released := 0
			got, ok := Victims(cands, tt.surplus, func(Candidate) error { released++; return nil }, func() bool { return released >= tt.needed })
			if ok != tt.ok || !slices.Equal(ids(got), tt.want) {
				t.Errorf("Victims = %v, %v; want %v, %v", ids(got), ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := Victims(cands, nil, func(Candidate) error { return errors.New("boom") }, func() bool { return true }); ok {
		t.Error("a failed release still made a plan")
	}
}

func TestSurplus(t *testing.T) {
	got := Surplus([]Member{{"a", 2}, {"a", 2}, {"a", 2}, {"b", 1}, {"b", 1}, {"c", -1}, {"", 3}})
	want := map[string]int{"a": 1, "b": 1, "c": 1}
	if len(got) != len(want) || got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
		t.Errorf("Surplus = %v, want %v", got, want)
	}
}

func TestBetter(t *testing.T) {
	plan := func(prios ...int32) Plan {
		var p Plan
		for _, pr := range prios {
			p.Victims = append(p.Victims, Candidate{Priority: pr})
		}
		return p
	}
	tests := []struct {
		p, q Plan
		want bool
	}{
		{plan(5), plan(1, 1), true},
		{plan(1, 1), plan(5), false},
		{plan(1, 3), plan(2, 2), false},
		{plan(1, 1), plan(2, 2), true},
		{plan(-5), plan(-3), true},
		{plan(2), plan(2), false},
	}
	for i, tt := range tests {
		if got := Better(tt.p, tt.q); got != tt.want {
			t.Errorf("case %d: Better = %v, want %v", i, got, tt.want)
		}
	}
}
