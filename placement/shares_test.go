package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// sharesNode is one node: a plain H100 (0), a managed MIG H100 (1), a
// static MIG H100 whose instance reports less memory than its profile (2),
// a plain GPU of 512 MiB (3) and a static MIG GPU of a model no catalog
// knows (4).
func sharesNode() inventory.Node {
	return inventory.Node{Name: "n", CPUMilli: 1000, MemoryMiB: 1024, GPUs: []inventory.GPU{
		{UUID: "GPU-plain", Index: 0, Model: "H100-SXM", MemoryMiB: 81559, Health: inventory.Healthy},
		{UUID: "GPU-dyn", Index: 1, Model: "H100-SXM", MemoryMiB: 81559, Health: inventory.Healthy, MIGMode: inventory.MIGEnabled, MIGManaged: true},
		{UUID: "GPU-static", Index: 2, Model: "H100-SXM", MemoryMiB: 81559, Health: inventory.Healthy, MIGMode: inventory.MIGEnabled,
			MIGInstances: []inventory.MIGInstance{{UUID: "MIG-a", Profile: "3g.40gb", MemoryMiB: 40192, Start: inventory.Slot(0)}}},
		{UUID: "GPU-tiny", Index: 3, Model: "H100-SXM", MemoryMiB: 512, Health: inventory.Healthy},
		{UUID: "GPU-odd", Index: 4, Model: "Mystery-GPU", MemoryMiB: 40000, Health: inventory.Healthy, MIGMode: inventory.MIGEnabled,
			MIGInstances: []inventory.MIGInstance{{UUID: "MIG-odd", Profile: "2g.20gb", MemoryMiB: 19968, Start: inventory.Slot(0)}}},
	}}
}

// TestShares: one decision for one part turns into one share per chosen
// GPU, resolved against that GPU: a fraction with its memory following
// compute, a burst limit, a memory-only share (compute from memory), an
// exclusive whole GPU, the 1 MiB memory floor, a MIG instance taken (the
// profile's compute slices, the instance's own memory) or created (the
// parent's UUID, the profile's memory), the profile read from the catalog
// when the snapshot has no MIG geometry, and a MIG GPU of unknown
// geometry (a whole GPU's compute, the instance's memory).
func TestShares(t *testing.T) {
	cat := catalog.Default()
	m, _ := cat.Lookup("H100-SXM")
	p := m.MIG.Profiles[m.MIG.ProfileIndex("3g.40gb")]
	c3 := int64(p.ComputeSlices) * request.Whole / int64(m.MIG.ComputeSlices)
	created := binding.Share{UUID: "GPU-dyn", Index: 1, ComputeMilli: c3, ComputeLimitMilli: c3, MemoryMiB: p.MemoryMiB, MemoryLimitMiB: p.MemoryMiB,
		MIGProfile: "3g.40gb", MIG: &binding.MIGInstance{GPU: "GPU-dyn", Start: 4, Create: true}}
	taken := binding.Share{UUID: "MIG-a", Index: 2, ComputeMilli: c3, ComputeLimitMilli: c3, MemoryMiB: 40192, MemoryLimitMiB: 40192,
		MIGProfile: "3g.40gb", MIG: &binding.MIGInstance{GPU: "GPU-static", Start: 0}}
	tests := []struct {
		name       string
		clusterCat *catalog.Catalog // the snapshot's MIG geometry
		cat        *catalog.Catalog // Shares' fallback
		req        request.GPU
		d          Decision
		want       []binding.Share
		err        string
	}{
		{name: "fraction: memory follows compute", clusterCat: cat, req: request.GPU{Count: 1, ComputeMilli: 250},
			d:    Decision{GPUs: []int{0}},
			want: []binding.Share{{UUID: "GPU-plain", Index: 0, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 20389, MemoryLimitMiB: 20389}}},
		{name: "burst and memory limits", clusterCat: cat, req: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 800, MemoryMiB: 10240, MemoryLimitMiB: 20480},
			d:    Decision{GPUs: []int{0}},
			want: []binding.Share{{UUID: "GPU-plain", Index: 0, ComputeMilli: 250, ComputeLimitMilli: 800, MemoryMiB: 10240, MemoryLimitMiB: 20480}}},
		{name: "memory only: compute from memory, rounded up", clusterCat: cat, req: request.GPU{Count: 1, MemoryMiB: 20480},
			d:    Decision{GPUs: []int{0}},
			want: []binding.Share{{UUID: "GPU-plain", Index: 0, ComputeMilli: 252, ComputeLimitMilli: 252, MemoryMiB: 20480, MemoryLimitMiB: 20480}}},
		{name: "exclusive: the whole GPU", clusterCat: cat, req: request.GPU{Count: 1, ComputeMilli: 100, Exclusive: true},
			d:    Decision{GPUs: []int{0}},
			want: []binding.Share{{UUID: "GPU-plain", Index: 0, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 81559, MemoryLimitMiB: 81559}}},
		{name: "memory at least 1 MiB", clusterCat: cat, req: request.GPU{Count: 1, ComputeMilli: 1},
			d:    Decision{GPUs: []int{3}},
			want: []binding.Share{{UUID: "GPU-tiny", Index: 3, ComputeMilli: 1, ComputeLimitMilli: 1, MemoryMiB: 1, MemoryLimitMiB: 1}}},
		{name: "two GPUs, in the decision's order", clusterCat: cat, req: request.GPU{Count: 2, ComputeMilli: 1000},
			d: Decision{GPUs: []int{3, 0}},
			want: []binding.Share{{UUID: "GPU-tiny", Index: 3, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 512, MemoryLimitMiB: 512},
				{UUID: "GPU-plain", Index: 0, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 81559, MemoryLimitMiB: 81559}}},
		{name: "MIG created: parent's UUID, profile's memory", clusterCat: cat, req: request.GPU{Count: 1, MIGProfile: "3G.40GB"},
			d: Decision{GPUs: []int{1}, MIG: []MIGChoice{{Start: 4, Create: true}}}, want: []binding.Share{created}},
		{name: "MIG taken: the instance's own memory", clusterCat: cat, req: request.GPU{Count: 1, MIGProfile: "3g.40gb"},
			d: Decision{GPUs: []int{2}, MIG: []MIGChoice{{Start: 0, UUID: "MIG-a"}}}, want: []binding.Share{taken}},
		{name: "MIG: no geometry on the snapshot, the catalog's", cat: cat, req: request.GPU{Count: 1, MIGProfile: "3g.40gb"},
			d: Decision{GPUs: []int{2}, MIG: []MIGChoice{{Start: 0, UUID: "MIG-a"}}}, want: []binding.Share{taken}},
		{name: "MIG of unknown geometry: whole compute, the instance's memory", clusterCat: cat, cat: cat, req: request.GPU{Count: 1, MIGProfile: "2g.20gb"},
			d: Decision{GPUs: []int{4}, MIG: []MIGChoice{{Start: 0, UUID: "MIG-odd"}}},
			want: []binding.Share{{UUID: "MIG-odd", Index: 4, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 19968, MemoryLimitMiB: 19968,
				MIGProfile: "2g.20gb", MIG: &binding.MIGInstance{GPU: "GPU-odd", Start: 0}}}},
		{name: "MIG decision without its instances", clusterCat: cat, req: request.GPU{Count: 1, MIGProfile: "3g.40gb"},
			d: Decision{GPUs: []int{2}}, err: "names 1 GPUs but 0 instances"},
		{name: "GPU position out of range", clusterCat: cat, req: request.GPU{Count: 1, ComputeMilli: 500},
			d: Decision{GPUs: []int{9}}, err: "GPU position 9 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := sharesNode()
			c, err := FromInventoryCatalog([]inventory.Node{inv}, tc.clusterCat)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Shares(&c.Nodes[0], &inv, tc.req, tc.d, tc.cat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if err := (binding.Assignment{Version: binding.Version, Node: "n", Containers: []binding.Container{{Name: "c", GPUs: got}}}).Validate(); err != nil {
				t.Errorf("the shares do not validate: %v", err)
			}
		})
	}
}

// TestSharesInventoryMismatch: a snapshot GPU the inventory does not hold
// is an error, not a share without a UUID.
func TestSharesInventoryMismatch(t *testing.T) {
	inv := sharesNode()
	c, err := FromInventoryCatalog([]inventory.Node{inv}, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	inv.GPUs = inv.GPUs[1:]
	if _, err := Shares(&c.Nodes[0], &inv, request.GPU{Count: 1, ComputeMilli: 500}, Decision{GPUs: []int{0}}, nil); err == nil || !strings.Contains(err.Error(), "GPU index 0 not in the inventory") {
		t.Errorf("err %v, want the missing GPU named", err)
	}
}
