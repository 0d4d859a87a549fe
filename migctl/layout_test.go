package migctl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// Layout re-reads what the driver has now, in start order, naming the
// workload holding each instance: one a workload acquired, one adopted at
// Reconcile, and none for the operator's; after a release the destroyed
// instance is gone. InventoryOf marks an instance in use when a workload
// holds it or the caller says a workload holds it (the operator's
// instance handed out as it is), with its profile's memory.
func TestLayout(t *testing.T) {
	sp := spec(t, "H100-SXM")
	f := migsim.NewGPU(sp, "GPU-x", 0)
	op, err := Create(f, sp, "1g.10gb", 6) // the operator's
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(f, sp, "2g.20gb", 4); err != nil { // a workload's, before a restart
		t.Fatal(err)
	}
	m := NewManager([]GPU{{UUID: "GPU-x", Device: f, Spec: sp}})
	if _, err := m.Reconcile(map[string][]Want{"old": {{GPU: "GPU-x", Profile: "2g.20gb", Start: 4}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire("new", Want{GPU: "GPU-x", Profile: "3g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	describe := func() string {
		t.Helper()
		l, err := m.Layout()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range l["GPU-x"] {
			if p.GPU != "GPU-x" || !strings.HasPrefix(p.UUID, "MIG-") || p.MemoryMiB != sp.Profiles[sp.ProfileIndex(p.Profile)].MemoryMiB {
				t.Errorf("instance %+v: want its GPU, UUID and profile memory", p)
			}
			out = append(out, fmt.Sprintf("%s@%d:%s", p.Profile, p.Start, p.Workload))
		}
		return strings.Join(out, " ")
	}
	if got := describe(); got != "3g.40gb@0:new 2g.20gb@4:old 1g.10gb@6:" {
		t.Errorf("layout %q", got)
	}
	l, _ := m.Layout()
	ins := InventoryOf(l["GPU-x"], func(uuid string) bool { return uuid == op.UUID }, func(string) int { return 16 })
	for _, in := range ins {
		if !in.InUse || in.Start == nil || in.SMCount != 16 || in.MemoryMiB <= 0 {
			t.Errorf("inventory instance %+v: want in use, with start, SMs and memory", in)
		}
	}
	if ins := InventoryOf(l["GPU-x"], nil, nil); ins[2].InUse || !ins[0].InUse || !ins[1].InUse {
		t.Errorf("without the caller's holdings: %+v, want the operator's free", ins)
	}
	if err := m.Release("new"); err != nil {
		t.Fatal(err)
	}
	if got := describe(); got != "2g.20gb@4:old 1g.10gb@6:" {
		t.Errorf("layout after the release %q", got)
	}
}
