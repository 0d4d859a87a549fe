package inventory

import (
	"strings"
	"testing"
)

func node() Node {
	return Node{Name: "n", GPUs: []GPU{
		{UUID: "GPU-a", Index: 0, MemoryMiB: 100},
		{UUID: "GPU-b", Index: 1, MemoryMiB: 100},
	}, Links: []Link{{A: 0, B: 1, NVLinks: 4, PCIe: PCIeSingleSwitch}}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Node)
		want   string
	}{
		{"valid", func(*Node) {}, ""},
		{"pod limit", func(n *Node) { n.Pods = 110 }, ""},
		{"negative pod limit", func(n *Node) { n.Pods = -1 }, "pods must be >= 0 (0: no limit), got -1"},
		{"duplicate index", func(n *Node) { n.GPUs[1].Index = 0 }, "gpus[1].index 0 is used twice"},
		{"empty uuid", func(n *Node) { n.GPUs[0].UUID = "" }, "gpus[0].uuid is empty"},
		{"duplicate uuid", func(n *Node) { n.GPUs[1].UUID = "GPU-a" }, `gpus[1].uuid "GPU-a" is used twice`},
		{"no memory", func(n *Node) { n.GPUs[0].MemoryMiB = 0 }, "gpus[0].memoryMiB must be > 0"},
		{"used above total", func(n *Node) { n.GPUs[0].MemoryUsedMiB = 101 }, "gpus[0].memoryUsedMiB must be in [0, 100], got 101"},
		{"over-allocated", func(n *Node) { n.GPUs[0].AllocatedMilli = 1001 }, "gpus[0].allocatedMilli must be in [0, 1000], got 1001"},
		{"managed without MIG", func(n *Node) { n.GPUs[0].MIGManaged = true }, "gpus[0].migManaged must be false when migMode is "},
		{"instances without MIG", func(n *Node) { n.GPUs[0].MIGInstances = []MIGInstance{{Profile: "1g.10gb"}} }, "gpus[0].migInstances must be empty"},
		{"negative start", func(n *Node) {
			n.GPUs[0].MIGMode = MIGEnabled
			n.GPUs[0].MIGInstances = []MIGInstance{{Profile: "1g.10gb", Start: Slot(-1)}}
		}, "gpus[0].migInstances[0].start must be >= 0, got -1"},
		{"instance uuid twice", func(n *Node) {
			n.GPUs[0].MIGMode = MIGEnabled
			n.GPUs[0].MIGInstances = []MIGInstance{{UUID: "MIG-1"}, {UUID: "MIG-1"}}
		}, `gpus[0].migInstances[1].uuid "MIG-1" is used twice`},
		{"managed MIG", func(n *Node) { n.GPUs[0].MIGMode, n.GPUs[0].MIGManaged = MIGEnabled, true }, ""},
		{"link to unknown GPU", func(n *Node) { n.Links[0].B = 7 }, "links[0] joins GPUs 0 and 7"},
		{"self link", func(n *Node) { n.Links[0].B = 0 }, "links[0] joins GPUs 0 and 0"},
		{"negative nvlinks", func(n *Node) { n.Links[0].NVLinks = -1 }, "links[0].nvlinks must be >= 0"},
		{"bad pcie", func(n *Node) { n.Links[0].PCIe = "XYZ" }, `links[0].pcie must be one of BOARD, PIX, PXB, PHB, NODE, SYS, got "XYZ"`},
	}
	for _, tc := range tests {
		n := node()
		tc.change(&n)
		err := n.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLinks(t *testing.T) {
	n := node()
	if l := n.LinkBetween(1, 0); l.NVLinks != 4 || l.PCIe != PCIeSingleSwitch {
		t.Errorf("LinkBetween(1,0) = %+v", l)
	}
	n.GPUs = append(n.GPUs, GPU{UUID: "GPU-c", Index: 2, MemoryMiB: 1})
	if l := n.LinkBetween(0, 2); l.NVLinks != 0 || l.PCIe != PCIeSystem {
		t.Errorf("unlisted pair = %+v, want SYS without NVLink", l)
	}
	order := []PCIePath{PCIeSameBoard, PCIeSingleSwitch, PCIeMultipleSwitch, PCIeHostBridge, PCIeNUMANode, PCIeSystem}
	for i, p := range order {
		if p.Rank() != i || !p.Valid() {
			t.Errorf("%s: rank %d valid %v", p, p.Rank(), p.Valid())
		}
	}
	if PCIePath("").Valid() || PCIePath("?").Rank() != PCIeSystem.Rank() {
		t.Error("unknown paths must be invalid and rank as SYS")
	}
	if g, ok := n.GPUByIndex(2); !ok || g.UUID != "GPU-c" {
		t.Errorf("GPUByIndex(2) = %v, %v", g, ok)
	}
	if _, ok := n.GPUByIndex(9); ok {
		t.Error("GPUByIndex(9) found a GPU")
	}
}
