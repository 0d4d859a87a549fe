package scheduler

import (
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
)

// fixedInventory gives every node the same inventory, named after it.
type fixedInventory struct{ node inventory.Node }

func (f fixedInventory) Node(n *corev1.Node) (inventory.Node, error) {
	in := f.node
	in.Name = n.Name
	in.GPUs = append([]inventory.GPU(nil), f.node.GPUs...)
	return in, nil
}

// TestBookingTakesTheNodesInUseInstances: the agent publishes the MIG
// instances its containers hold as in use. Booking the pods that hold them
// takes them again exactly (no saturated booking, so the pods stay
// preemptible), and an instance no pod names stays taken.
func TestBookingTakesTheNodesInUseInstances(t *testing.T) {
	start := func(s int) *int { return &s }
	gpu := inventory.GPU{UUID: "GPU-p", Index: 0, Model: "A100-40GB", MemoryMiB: 40960, NUMANode: -1, Health: inventory.Healthy,
		MIGMode: inventory.MIGEnabled, MIGManaged: true, MIGInstances: []inventory.MIGInstance{
			{UUID: "MIG-static", Profile: "3g.20gb", MemoryMiB: 20096, Start: start(0), InUse: true}, // held by pod static
			{UUID: "MIG-made", Profile: "1g.5gb", MemoryMiB: 4864, Start: start(4), InUse: true},     // created for pod made
			{UUID: "MIG-left", Profile: "1g.5gb", MemoryMiB: 4864, Start: start(5), InUse: true},     // busy, no pod names it
			{UUID: "MIG-free", Profile: "1g.5gb", MemoryMiB: 4864, Start: start(6)},
		}}
	inv := fixedInventory{inventory.Node{CPUMilli: 16000, MemoryMiB: 65536, GPUs: []inventory.GPU{gpu}}}
	node := labelNode("mig-0", "1", "A100-40GB")
	mig := func(uuid, profile string, at int, create bool) *binding.Assignment {
		s := binding.Share{UUID: uuid, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 4864, MemoryLimitMiB: 4864, MIGProfile: profile,
			MIG: &binding.MIGInstance{GPU: "GPU-p", Start: at, Create: create}}
		if create {
			s.UUID = "GPU-p"
		}
		return &binding.Assignment{Version: 1, Node: "mig-0", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{s}}}}
	}
	pods := []*corev1.Pod{
		boundPod("static", "mig-0", mig("MIG-static", "3g.20gb", 0, false)),
		boundPod("made", "mig-0", mig("", "1g.5gb", 4, true)),
	}
	for _, p := range pods {
		p.Spec.SchedulerName = DefaultName // ours: exactly booked, it may be preempted
	}
	snap := buildSnapshot(slog.New(slog.NewTextHandler(io.Discard, nil)), inv, []*corev1.Node{node}, pods)
	if on := snap.books.OnNode(0); len(on) != 2 {
		t.Fatalf("bookings %v, want the two pods on mig-0", on)
	}
	for _, r := range snap.books.Running() {
		if r.Stopping {
			t.Errorf("pod %s booked by saturation: its own instance was taken as someone else's", r.ID)
		}
	}
	inUse := map[string]bool{}
	for _, in := range snap.cluster.Nodes[0].GPUs[0].MIG.Instances {
		inUse[in.UUID] = in.InUse
	}
	want := map[string]bool{"MIG-static": true, "MIG-made": true, "MIG-left": true, "MIG-free": false}
	for uuid, w := range want {
		if inUse[uuid] != w {
			t.Errorf("instance %s in use %v, want %v (all: %v)", uuid, inUse[uuid], w, inUse)
		}
	}
}
