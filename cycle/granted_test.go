package cycle

import (
	"fmt"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// TestGrantedIsWhatTheSharesSay: a placed part takes from its queue the
// GPU compute and memory its shares grant on the GPUs it got (memory a
// request leaves unsaid is its compute's share of the GPU's), not only
// what it asked.
func TestGrantedIsWhatTheSharesSay(t *testing.T) {
	n := inventory.Node{Name: "n0", CPUMilli: 64000, MemoryMiB: 256 << 10}
	for i := range 4 {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: fmt.Sprintf("gpu-%d", i), Index: i, Model: "H100", MemoryMiB: 80000, Health: inventory.Healthy, NUMANode: -1})
	}
	c, err := placement.FromInventory([]inventory.Node{n})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		gpu  request.GPU
		gpus []int
		want queueing.Resources
	}{
		{"a quarter, no memory asked", request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}, []int{2},
			queueing.Resources{GPUMilli: 250, GPUMemoryMiB: 20000, CPUMilli: 1000, MemoryMiB: 512}},
		{"a quarter, memory asked", request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 4096, MemoryLimitMiB: 4096}, []int{0},
			queueing.Resources{GPUMilli: 250, GPUMemoryMiB: 4096, CPUMilli: 1000, MemoryMiB: 512}},
		{"two whole GPUs", request.GPU{Count: 2, ComputeMilli: 1000, ComputeLimitMilli: 1000}, []int{0, 1},
			queueing.Resources{GPUMilli: 2000, GPUMemoryMiB: 160000, CPUMilli: 1000, MemoryMiB: 512}},
		{"exclusive", request.GPU{Count: 1, ComputeMilli: 100, ComputeLimitMilli: 100, Exclusive: true}, []int{3},
			queueing.Resources{GPUMilli: 1000, GPUMemoryMiB: 80000, CPUMilli: 1000, MemoryMiB: 512}},
		{"no GPU", request.GPU{}, nil, queueing.Resources{CPUMilli: 1000, MemoryMiB: 512}},
	} {
		p := placement.Pod{Name: "p", CPUMilli: 1000, MemoryMiB: 512, GPU: tc.gpu}
		if got := Granted(c, p, placement.Decision{Node: 0, GPUs: tc.gpus}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
