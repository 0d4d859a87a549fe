package placement

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

func TestApplyReleaseRoundTrip(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("a", 8000, 1000, 2, "T4", 16000)}}
	p := sharePod("p", 2000, 250)
	p.MemoryMiB = 100
	d := Decision{Node: 0, GPUs: []int{1}}
	if err := c.Apply(&p, d); err != nil {
		t.Fatal(err)
	}
	n := &c.Nodes[0]
	if n.FreeCPUMilli != 6000 || n.FreeMemoryMiB != 900 || n.GPUs[1].FreeMilli != 750 || n.GPUs[1].FreeMemoryMiB != 12000 {
		t.Fatalf("after apply: %+v", n)
	}
	if err := c.Release(&p, d); err != nil {
		t.Fatal(err)
	}
	if n.FreeCPUMilli != 8000 || n.GPUs[1].FreeMilli != request.Whole || n.GPUs[1].FreeMemoryMiB != 16000 || len(n.Shapes) != 0 {
		t.Fatalf("after release: %+v", n)
	}
	if err := c.Release(&p, d); err == nil {
		t.Fatal("second release succeeded; want an error (more free than capacity)")
	}
}

func TestApplyRejectsOverAllocationWithoutChange(t *testing.T) {
	base := &Cluster{Nodes: []Node{NewNode("a", 4000, 0, 2, "T4", 0)}}
	cases := []struct {
		name string
		pod  Pod
		d    Decision
		want string
	}{
		{"cpu", sharePod("p", 5000, 100), Decision{Node: 0, GPUs: []int{0}}, "CPU"},
		{"gpu share", sharePod("p", 1, 600), Decision{Node: 0, GPUs: []int{0}}, ""},
		{"node index", sharePod("p", 1, 100), Decision{Node: 3, GPUs: []int{0}}, "out of range"},
		{"gpu index", sharePod("p", 1, 100), Decision{Node: 0, GPUs: []int{7}}, "out of range"},
		{"count", wholePod("p", 1, 2), Decision{Node: 0, GPUs: []int{0}}, "names 1 GPUs"},
		{"twice", wholePod("p", 1, 2), Decision{Node: 0, GPUs: []int{1, 1}}, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base.Clone()
			if tc.name == "gpu share" {
				pre := sharePod("pre", 1, 500)
				if err := c.Apply(&pre, Decision{Node: 0, GPUs: []int{0}}); err != nil {
					t.Fatal(err)
				}
			}
			snap := c.Clone()
			err := c.Apply(&tc.pod, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply = %v, want error containing %q", err, tc.want)
			}
			if c.Nodes[0].FreeCPUMilli != snap.Nodes[0].FreeCPUMilli || c.Nodes[0].GPUs[0].FreeMilli != snap.Nodes[0].GPUs[0].FreeMilli {
				t.Fatal("failed Apply changed the snapshot")
			}
		})
	}
}

func TestFromInventory(t *testing.T) {
	in := []inventory.Node{{
		Name: "h1", CPUMilli: 64000, MemoryMiB: 1 << 18,
		GPUs: []inventory.GPU{
			{UUID: "a", Index: 0, Model: "H100-80GB", MemoryMiB: 81920, NUMANode: 0, AllocatedMilli: 250, MemoryUsedMiB: 1024, Health: inventory.Healthy},
			{UUID: "b", Index: 1, Model: "H100-80GB", MemoryMiB: 81920, NUMANode: 0, Health: inventory.Healthy},
			{UUID: "c", Index: 2, Model: "H100-80GB", MemoryMiB: 81920, NUMANode: 1, Health: inventory.Unhealthy},
		},
		Links: []inventory.Link{{A: 0, B: 1, NVLinks: 18, PCIe: inventory.PCIeSystem}},
	}}
	c, err := FromInventory(in)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[0]
	if len(n.GPUs) != 2 {
		t.Fatalf("want the unhealthy GPU left out, got %d GPUs", len(n.GPUs))
	}
	if n.GPUs[0].FreeMilli != 750 || n.GPUs[0].FreeMemoryMiB != 80896 || n.NVLinks[0][1] != 18 || n.NVLinks[1][0] != 18 {
		t.Fatalf("adapted node: %+v", n)
	}
	bad := []inventory.Node{{Name: "x", GPUs: []inventory.GPU{{UUID: "", Index: 0, MemoryMiB: 1}}}}
	if _, err := FromInventory(bad); err == nil {
		t.Fatal("want an error for an invalid inventory node")
	}
}
