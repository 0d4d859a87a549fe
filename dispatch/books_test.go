package dispatch

import (
	"fmt"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
)

// TestCycleOnTheCoresBooks: a frame with no cluster of its own cycles on
// the core's books; what it binds is assumed there (the next cycle counts
// it), a failed binding gives it back, and the front door's hold for the
// bound workload replaces the assumption.
func TestCycleOnTheCoresBooks(t *testing.T) {
	c, frame := booksCore(t, 2)
	for i, id := range []string{"a", "b", "c"} {
		c.Add(Item{ID: id, Arrived: t0, Seq: uint64(i)})
	}
	rd, err := c.Cycle(t0, frame)
	if err != nil {
		t.Fatal(err)
	}
	if got := binds(rd); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("binds %v, want [a b] (two GPUs)", got)
	}
	for _, id := range []string{"a", "b"} {
		if held, assumed := c.Books().Has(id); !held || !assumed {
			t.Fatalf("%s: held %v assumed %v, want assumed on the books", id, held, assumed)
		}
	}
	if rd, _ := c.Cycle(t0, frame); len(rd.Binds) != 0 {
		t.Fatalf("a second cycle bound %v while a and b are assumed on both GPUs", binds(rd))
	}

	c.BindFailed("a", t0)
	if held, _ := c.Books().Has("a"); held {
		t.Fatal("a failed binding left its assumption on the books")
	}
	rd, err = c.Cycle(t0, frame) // no backoff configured: a first again
	if err != nil {
		t.Fatal(err)
	}
	if got := binds(rd); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after a's binding failed: binds %v, want [a] on the GPU it gave back", got)
	}

	// b is seen bound on GPU 1 (as its front door reads it back).
	c.Bound("b")
	pos := runningGPU(t, c, "b")
	h := booked.Hold{ID: "b", Node: "n0", Key: "b", CPUMilli: 1000, Groups: [][]binding.Share{{{UUID: fmt.Sprintf("gpu-%d", pos), Index: pos,
		ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 143771, MemoryLimitMiB: 143771}}}}
	if err := c.Books().Book(h); err != nil {
		t.Fatal(err)
	}
	if held, assumed := c.Books().Has("b"); !held || assumed {
		t.Fatalf("b: held %v assumed %v, want booked by its front door", held, assumed)
	}
	for i, g := range c.Books().Cluster().Nodes[0].GPUs {
		if g.FreeMilli != 0 {
			t.Errorf("GPU %d has %d free after b's hold replaced its assumption, want 0 (a and b)", i, g.FreeMilli)
		}
	}
}

// runningGPU is the GPU position the books' running entry for id holds.
func runningGPU(t *testing.T, c *Core, id string) int {
	t.Helper()
	for _, r := range c.Books().Running() {
		if r.ID == id {
			return r.Decisions[0].GPUs[0]
		}
	}
	t.Fatalf("%s is not running on the books", id)
	return -1
}
