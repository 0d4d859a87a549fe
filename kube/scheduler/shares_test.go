package scheduler

import (
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// TestSharesOfAnExistingMIGInstance: the share of an existing MIG instance
// carries the instance's memory as the node reports it (as on the host
// daemon), not the profile's from the catalog; a MIG decision without its
// instance choices gives no shares rather than a whole-GPU share of the
// parent.
func TestSharesOfAnExistingMIGInstance(t *testing.T) {
	cat := catalog.Default()
	m, _ := cat.Lookup("A100-40GB")
	p := m.MIG.Profiles[m.MIG.ProfileIndex("3g.20gb")]
	const reported = 20096
	if p.MemoryMiB == reported {
		t.Fatalf("the catalog's 3g.20gb has %d MiB: pick another reported size", p.MemoryMiB)
	}
	gpu := inventory.GPU{UUID: "GPU-p", Index: 0, Model: "A100-40GB", MemoryMiB: 40960, NUMANode: -1, Health: inventory.Healthy,
		MIGMode: inventory.MIGEnabled, MIGInstances: []inventory.MIGInstance{{UUID: "MIG-a", Profile: "3g.20gb", MemoryMiB: reported, Start: inventory.Slot(0)}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	snap := buildSnapshot(log, fixedInventory{inventory.Node{CPUMilli: 16000, MemoryMiB: 65536, GPUs: []inventory.GPU{gpu}}},
		[]*corev1.Node{labelNode("mig-0", "1", "A100-40GB")}, nil)
	s := &Scheduler{cfg: Config{Catalog: cat, Log: log}}
	r := request.GPU{Count: 1, MIGProfile: "3g.20gb"}
	got := s.shares(snap, 0, placement.Decision{Node: 0, GPUs: []int{0}, MIG: []placement.MIGChoice{{Start: 0, UUID: "MIG-a"}}}, r)
	c := int64(p.ComputeSlices) * request.Whole / int64(m.MIG.ComputeSlices)
	if len(got) != 1 || got[0].UUID != "MIG-a" || got[0].MemoryMiB != reported || got[0].MemoryLimitMiB != reported || got[0].ComputeMilli != c {
		t.Errorf("shares %+v, want MIG-a with the instance's %d MiB and compute %d", got, reported, c)
	}
	if got := s.shares(snap, 0, placement.Decision{Node: 0, GPUs: []int{0}}, r); got != nil {
		t.Errorf("MIG decision without instances: %+v, want no shares", got)
	}
}
