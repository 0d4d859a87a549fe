package booked

import (
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// TestCoreStartOutlivesTheFrontDoors: a workload the core bound keeps the
// start the core recorded (its cycle's time and bind order) when its
// front door books it with a start of its own (a kubelet's), so that the
// victims' order is the core's alone; one the core did not bind keeps the
// front door's.
func TestCoreStartOutlivesTheFrontDoors(t *testing.T) {
	c, p, d := placedOnGPU1(t, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 4096, MemoryLimitMiB: 4096})
	bound, kubelet := time.Unix(100, 0), time.Unix(103, 0)
	c.Assume("w", cycle.Running{ID: "w", Queue: "q", Started: bound, Order: 7, Parts: []placement.Pod{p}, Decisions: []placement.Decision{d}})
	hold := func(id string, gpu int) Hold {
		return Hold{ID: id, Node: "n0", Key: id, CPUMilli: 500, Queue: "q", Started: kubelet, Groups: [][]binding.Share{{share("n0", gpu, 250)}}}
	}
	if err := c.Book(hold("w", 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Book(hold("other", 0)); err != nil {
		t.Fatal(err)
	}
	// Booked again with the same key (a status update): still the core's.
	if err := c.Book(hold("w", 1)); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		started time.Time
		order   uint64
	}{"w": {bound, 7}, "other": {kubelet, 0}}
	for _, r := range c.Running() {
		w := want[r.ID]
		if !r.Started.Equal(w.started) || r.Order != w.order {
			t.Errorf("%s runs from %v (order %d), want %v (order %d)", r.ID, r.Started, r.Order, w.started, w.order)
		}
		delete(want, r.ID)
	}
	if len(want) > 0 {
		t.Errorf("not running: %v", want)
	}
}

// TestAssumedUsageIsTheShares: what an assumed workload takes from its
// queue is what its shares will say once its front door books it (a
// request with no GPU memory is granted its compute's share of the GPU's
// memory), so usage does not change when the front door catches up.
func TestAssumedUsageIsTheShares(t *testing.T) {
	r := request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}
	c, p, d := placedOnGPU1(t, r)
	c.Assume("w", cycle.Running{ID: "w", Queue: "q", Parts: []placement.Pod{p}, Decisions: []placement.Decision{d}})
	assumed := c.Usage()["q"]
	g := inv("n0", 2, 4000).GPUs[1]
	s := placement.GPUShare(r, g.UUID, g.Index, g.MemoryMiB)
	if err := c.Book(Hold{ID: "w", Node: "n0", Key: "k", CPUMilli: 500, Queue: "q", Groups: [][]binding.Share{{s}}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Usage()["q"]; got != assumed || got.GPUMemoryMiB == 0 {
		t.Errorf("usage while assumed %+v, once booked from its shares %+v (want equal, with GPU memory)", assumed, got)
	}
}
