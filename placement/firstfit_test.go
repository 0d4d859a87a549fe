package placement

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// TestFirstFit: every pod goes to the first node that can take it, on its
// first GPUs that can; a MIG request to the first GPU with room, at the
// lowest start.
func TestFirstFit(t *testing.T) {
	plain := func() *Cluster {
		c := &Cluster{Nodes: []Node{
			NewNode("small", 2000, 4096, 1, "T4", 0),
			NewNode("a", 16000, 65536, 4, "T4", 0),
			NewNode("b", 16000, 65536, 4, "T4", 0),
		}}
		c.Nodes[1].GPUs[0].FreeMilli = 300
		c.Nodes[1].GPUs[1].FreeMilli = 0
		return c
	}
	cases := []struct {
		name string
		pod  Pod
		want Decision
	}{
		{"cpu only, fits the first node", Pod{Name: "c", CPUMilli: 1000}, Decision{Node: 0}},
		{"cpu only, too big for the first", Pod{Name: "c", CPUMilli: 3000}, Decision{Node: 1}},
		{"share, first GPU with room", sharePod("s", 1000, 250), Decision{Node: 0, GPUs: []int{0}}},
		{"share too big for GPU 0 of a", Pod{Name: "s", CPUMilli: 3000, GPU: request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500}}, Decision{Node: 1, GPUs: []int{2}}},
		{"two whole GPUs", wholePod("w", 3000, 2), Decision{Node: 1, GPUs: []int{2, 3}}},
		{"three whole GPUs", wholePod("w", 3000, 3), Decision{Node: 2, GPUs: []int{0, 1, 2}}},
	}
	for _, tc := range cases {
		c := plain()
		d, err := NewFirstFit().Place(c, &tc.pod)
		if err != nil || !reflect.DeepEqual(d, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, d, err, tc.want)
			continue
		}
		if err := c.Apply(&tc.pod, d); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	c := plain()
	if _, err := NewFirstFit().Place(c, &Pod{Name: "huge", CPUMilli: 1 << 30}); !errors.Is(err, ErrNoFit) {
		t.Errorf("a pod nothing takes: %v", err)
	}
	m := cluster(t, migInv("full", "A100-40GB", 1, true, []inventory.MIGInstance{inst("7g.40gb", 0, "MIG-x", true)}), migInv("m", "A100-40GB", 2, true,
		[]inventory.MIGInstance{inst("3g.20gb", 0, "MIG-y", true)}))
	p := migPod("p", "1g.5gb", 1)
	d, err := NewFirstFit().Place(m, &p)
	if err != nil || !reflect.DeepEqual(d, Decision{Node: 1, GPUs: []int{0}, MIG: []MIGChoice{{Start: 4, Create: true}}}) {
		t.Errorf("MIG: %+v, %v; want 1g at slice 4 of node m's GPU 0", d, err)
	}
}
