package hostd

import (
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// TestSharesOfMemoryFloor: a share's memory is at least 1 MiB, as the
// Kubernetes scheduler's (placement.Shares): a thousandth of a GPU of 512
// MiB, whose memory following compute rounds to 0, gets 1 MiB.
func TestSharesOfMemoryFloor(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "1xL4")
	cfg.Nodes = []inventory.Node{{Name: "tiny", CPUMilli: 1000, MemoryMiB: 1024, GPUs: []inventory.GPU{
		{UUID: "GPU-tiny", Index: 0, Model: "L4", MemoryMiB: 512, NUMANode: -1, Health: inventory.Healthy}}}}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	got, err := d.sharesOf(api.Job{GPU: request.GPU{Count: 1, ComputeMilli: 1}}, placement.Decision{Node: 0, GPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].UUID != "GPU-tiny" || got[0].ComputeMilli != 1 || got[0].MemoryMiB != 1 || got[0].MemoryLimitMiB != 1 {
		t.Errorf("shares %+v, want GPU-tiny with compute 1 and memory 1 MiB", got)
	}
}

// TestQueueShareCountsHealthyGPUs: a queue's fair-share position is over
// the GPUs the host can schedule on (cycle.Capacity, as its cycle and the
// Kubernetes scheduler count them): with one of two GPUs unhealthy, half a
// GPU in use is half of the capacity, not a quarter.
func TestQueueShareCountsHealthyGPUs(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "2xL4", func(c *Config) { c.Nodes[0].GPUs[1].Health = inventory.Unhealthy })
	id := submit(t, d, gatedJob(gates, map[string]string{"compute": "0.5"}, 0)).ID
	eventually(t, "job runs", func() bool { return started(t, d, id) })
	qs, err := d.Queues()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range qs {
		// No guarantee: 1 + the dominant share of the capacity in use.
		if q.Name == DefaultQueue {
			found = true
			if q.Share != 1.5 {
				t.Errorf("default queue share %v, want 1.5 (half of the one healthy GPU)", q.Share)
			}
		}
	}
	if !found {
		t.Errorf("queues %+v: no default queue", qs)
	}
	drain(t, d, gates)
}
