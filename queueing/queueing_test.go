package queueing

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func gpus(n int64) Resources { return Resources{GPUMilli: n * 1000} }

func TestNewTreeErrors(t *testing.T) {
	tests := []struct {
		qs   []Queue
		want string
	}{
		{[]Queue{{Name: "Bad_Name"}}, `queues[0].name: must be a lowercase DNS label`},
		{[]Queue{{Name: "a"}, {Name: "a"}}, `queues[1].name: "a" is defined twice`},
		{[]Queue{{Name: "a", Weight: -1}}, "queues[0].weight: must be >= 0"},
		{[]Queue{{Name: "a", Guaranteed: Resources{CPUMilli: -5}}}, "queues[0].guaranteed.cpuMilli: must be >= 0, got -5"},
		{[]Queue{{Name: "a", Guaranteed: gpus(4), Limit: gpus(2)}}, "queues[0].guaranteed: must be within queues[0].limit"},
		{[]Queue{{Name: "a", Parent: "nope"}}, `queue a: parent "nope" is not defined`},
		{[]Queue{{Name: "a", Parent: "b"}, {Name: "b", Parent: "a"}}, "is a cycle or deeper than 8"},
		{[]Queue{{Name: "a", IdleReclaimAfter: 29 * time.Minute}}, "queues[0].idleReclaimAfter: must be 0 (off) or in [30m, 168h], got 29m0s"},
	}
	for _, tc := range tests {
		if _, err := NewTree(tc.qs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewTree(%+v) = %v, want %q", tc.qs, err, tc.want)
		}
	}
}

func TestTreeIdleReclaimAfter(t *testing.T) {
	tree, err := NewTree([]Queue{{Name: "notebooks", IdleReclaimAfter: time.Hour}, {Name: "batch"}})
	if err != nil {
		t.Fatal(err)
	}
	if !tree.IdleReclaims() {
		t.Error("IdleReclaims = false with notebooks set")
	}
	for q, want := range map[string]time.Duration{"notebooks": time.Hour, "batch": 0, "": 0, "unknown": 0} {
		if got := tree.IdleReclaimAfter(q); got != want {
			t.Errorf("IdleReclaimAfter(%q) = %v, want %v", q, got, want)
		}
	}
	def, err := NewTree([]Queue{{Name: DefaultQueue, IdleReclaimAfter: 3 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if got := def.IdleReclaimAfter("unknown"); got != 3*time.Hour {
		t.Errorf("an unknown queue is the default one's: got %v", got)
	}
	if plain, _ := NewTree(nil); plain.IdleReclaims() {
		t.Error("IdleReclaims = true with no queue set")
	}
}

func TestOrderUnderQuotaFirstThenWeightedOverQuota(t *testing.T) {
	tree, err := NewTree([]Queue{
		{Name: "research", Guaranteed: gpus(4)},
		{Name: "prod", Guaranteed: gpus(4), Priority: 0},
		{Name: "batch", Weight: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := tree.NewLedger(gpus(16), map[string]Resources{"research": gpus(6), "prod": gpus(2), "batch": gpus(1)})
	// prod is below its guarantee: first. research (2 over, weight 1) vs
	// batch (1 over, weight 3): batch's weighted over-quota share is lower.
	got := strings.Join(l.Order([]string{"research", "prod", "batch"}), ",")
	if got != "prod,batch,research" {
		t.Fatalf("order = %s", got)
	}
}

func TestPriorityBeatsShare(t *testing.T) {
	tree, _ := NewTree([]Queue{{Name: "urgent", Priority: 10}, {Name: "normal"}})
	l := tree.NewLedger(gpus(8), map[string]Resources{"urgent": gpus(7)})
	if got := l.Order([]string{"normal", "urgent"}); got[0] != "urgent" {
		t.Fatalf("order = %v", got)
	}
}

func TestHierarchy(t *testing.T) {
	tree, err := NewTree([]Queue{
		{Name: "team-a", Guaranteed: gpus(4)},
		{Name: "team-b", Guaranteed: gpus(4)},
		{Name: "a-train", Parent: "team-a"},
		{Name: "a-infer", Parent: "team-a", Limit: gpus(1)},
		{Name: "b-all", Parent: "team-b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := tree.NewLedger(gpus(10), map[string]Resources{"a-train": gpus(3), "b-all": gpus(1)})
	if got := l.Used("team-a"); got != gpus(3) {
		t.Errorf("Used(team-a) = %+v", got)
	}
	// team-b uses less of its guarantee, so its leaf goes first.
	if got := l.Order([]string{"a-infer", "b-all", "a-train"}); got[0] != "b-all" {
		t.Errorf("order = %v", got)
	}
	if err := l.Admit("a-infer", gpus(2)); err == nil || !strings.Contains(err.Error(), "queue a-infer: would use") {
		t.Errorf("limit not enforced: %v", err)
	}
	if err := l.Admit("a-infer", gpus(1)); err != nil {
		t.Errorf("within limit: %v", err)
	}
	// Unknown queues are the default queue.
	l.Charge("ghost", gpus(1))
	if l.Used(DefaultQueue) != gpus(1) {
		t.Errorf("unknown queue not charged to default")
	}
}

// TestRandomizedFairness serves random one-GPU requests from queues with
// weights through Order and Admit until the cluster is full: limits always
// hold, guarantees are met first, and over-quota GPUs split by weight.
func TestRandomizedFairness(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tree, err := NewTree([]Queue{
			{Name: "a", Guaranteed: gpus(10), Weight: 1},
			{Name: "b", Weight: 1, Limit: gpus(30)},
			{Name: "c", Weight: 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		total := gpus(100)
		l := tree.NewLedger(total, nil)
		free := total.GPUMilli
		for free > 0 {
			q := l.Order([]string{"a", "b", "c"})
			placed := false
			for _, name := range q {
				size := gpus(int64(1 + rng.IntN(2)))
				if size.GPUMilli > free || l.Admit(name, size) != nil {
					continue
				}
				l.Charge(name, size)
				free -= size.GPUMilli
				placed = true
				break
			}
			if !placed {
				break
			}
		}
		a, b, c := l.Used("a").GPUMilli/1000, l.Used("b").GPUMilli/1000, l.Used("c").GPUMilli/1000
		if b > 30 {
			t.Fatalf("seed %d: b over its limit: %d", seed, b)
		}
		if a < 10 {
			t.Fatalf("seed %d: a below its guarantee: %d", seed, a)
		}
		// Over quota: a has a-10, b has b, c has c; c's weight is 3.
		if c < 2*b || c < 2*(a-10) {
			t.Fatalf("seed %d: weights not honoured: a=%d b=%d c=%d", seed, a, b, c)
		}
	}
}

func TestDominantShare(t *testing.T) {
	total := Resources{GPUMilli: 8000, CPUMilli: 64000}
	if got := (Resources{GPUMilli: 2000, CPUMilli: 32000}).DominantShare(total); got != 0.5 {
		t.Errorf("DominantShare = %v, want 0.5 (CPU dominates)", got)
	}
}
