package queue

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/queueing"
)

func jobs(queue string, n int, seq0 uint64) []Item {
	var out []Item
	for i := 0; i < n; i++ {
		out = append(out, Item{ID: fmt.Sprintf("%s%d", queue, i), Queue: queue, Seq: seq0 + uint64(i), Need: queueing.Resources{GPUMilli: 1000}})
	}
	return out
}

func ids(items []Item) string {
	var s []string
	for _, it := range items {
		s = append(s, it.ID)
	}
	return strings.Join(s, ",")
}

func TestFairShareAlternatesQueues(t *testing.T) {
	items := append(jobs("a", 4, 0), jobs("b", 2, 10)...)
	got := ids(FairShare{}.Order(items, time.Time{}))
	if got != "a0,b0,a1,b1,a2,a3" {
		t.Fatalf("order = %s", got)
	}
}

func TestFairShareCountsRunningJobs(t *testing.T) {
	items := append(jobs("a", 2, 0), jobs("b", 2, 10)...)
	used := map[string]queueing.Resources{"a": {GPUMilli: 2000}}
	got := ids(FairShare{}.OrderWithUsage(items, time.Time{}, queueing.Resources{GPUMilli: 8000}, used))
	if got != "b0,b1,a0,a1" {
		t.Fatalf("order = %s", got)
	}
}

func TestFairShareHonoursWeightsAndPriority(t *testing.T) {
	items := append(jobs("heavy", 6, 0), jobs("light", 6, 10)...)
	f := FairShare{Queues: []queueing.Queue{{Name: "heavy", Weight: 3}}}
	got := FairShare.OrderWithUsage(f, items, time.Time{}, queueing.Resources{GPUMilli: 16000}, nil)
	heavy := 0
	for _, it := range got[:8] {
		if it.Queue == "heavy" {
			heavy++
		}
	}
	if heavy != 6 {
		t.Fatalf("first 8 starts: %d heavy, want 6 (weight 3:1): %s", heavy, ids(got))
	}
	// Within a queue, priority still wins.
	items = jobs("a", 3, 0)
	items[2].Priority = 5
	if got := ids(FairShare{}.Order(items, time.Time{})); got != "a2,a0,a1" {
		t.Fatalf("within-queue order = %s", got)
	}
}

func TestTree(t *testing.T) {
	tree := Tree([]queueing.Queue{{Name: "owner", Guaranteed: queueing.Resources{GPUMilli: 1000}}}, []string{"owner", "adhoc", "adhoc"})
	if got := strings.Join(tree.Names(), ","); got != "adhoc,default,owner" {
		t.Errorf("names = %s", got)
	}
	if q, _ := tree.Queue("owner"); q.Guaranteed.GPUMilli != 1000 {
		t.Errorf("configured guarantee lost: %+v", q)
	}
	if q, _ := tree.Queue("adhoc"); q.Weight != 1 || !q.Guaranteed.IsZero() {
		t.Errorf("queue created on use: %+v", q)
	}
	// A name the tree rejects (an older record's underscore) is left out;
	// ordering still works, charging it to the default queue.
	odd := Tree(nil, []string{"my_queue", "ok"})
	if got := strings.Join(odd.Names(), ","); got != "default,ok" {
		t.Errorf("names = %s", got)
	}
	items := append(jobs("my_queue", 2, 0), jobs("ok", 1, 10)...)
	if got := ids(FairShare{}.Order(items, time.Time{})); len(got) == 0 {
		t.Error("no order")
	}
	// An inconsistent configured set falls back to flat queues.
	flat := Tree([]queueing.Queue{{Name: "a", Parent: "nope"}}, []string{"b"})
	if got := strings.Join(flat.Names(), ","); got != "a,b,default" {
		t.Errorf("fallback names = %s", got)
	}
}
