package placement

import (
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

// TestMemoryOnlyShareBooksComputePerGPU: a request with memory and no
// compute share takes compute in proportion to memory on the chosen GPU,
// so two such requests for 60% of a GPU's memory never share one GPU.
func TestMemoryOnlyShareBooksComputePerGPU(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("n", 0, 0, 2, "H100", 80000)}}
	p := &Pod{Name: "m", GPU: request.GPU{Count: 1, MemoryMiB: 48000}}
	pol := NewBestFit(1)
	var used []int
	for i := 0; i < 2; i++ {
		d, err := pol.Place(c, p)
		if err != nil {
			t.Fatalf("place %d: %v", i, err)
		}
		if err := c.Apply(p, d); err != nil {
			t.Fatal(err)
		}
		used = append(used, d.GPUs[0])
	}
	if used[0] == used[1] {
		t.Fatalf("both memory-only shares went to GPU %d", used[0])
	}
	for _, g := range c.Nodes[0].GPUs {
		if g.FreeMilli != 400 || g.FreeMemoryMiB != 32000 {
			t.Errorf("GPU %d: free %dm / %d MiB, want 400m / 32000 MiB", g.Index, g.FreeMilli, g.FreeMemoryMiB)
		}
	}
	if _, err := pol.Place(c, p); err == nil {
		t.Fatal("a third 60% share fitted on two GPUs")
	}
	d := Decision{Node: 0, GPUs: []int{0}}
	if err := c.Release(p, d); err != nil || c.Nodes[0].GPUs[0].FreeMilli != request.Whole {
		t.Fatalf("release: %v, free %d", err, c.Nodes[0].GPUs[0].FreeMilli)
	}
}
