package nvmlgpu

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/inventory"
)

func TestPCIePath(t *testing.T) {
	tests := []struct {
		level nvml.GpuTopologyLevel
		want  inventory.PCIePath
	}{
		{nvml.TOPOLOGY_INTERNAL, inventory.PCIeSameBoard},
		{nvml.TOPOLOGY_SINGLE, inventory.PCIeSingleSwitch},
		{nvml.TOPOLOGY_MULTIPLE, inventory.PCIeMultipleSwitch},
		{nvml.TOPOLOGY_HOSTBRIDGE, inventory.PCIeHostBridge},
		{nvml.TOPOLOGY_NODE, inventory.PCIeNUMANode},
		{nvml.TOPOLOGY_SYSTEM, inventory.PCIeSystem},
		{nvml.GpuTopologyLevel(99), ""},
	}
	for _, tt := range tests {
		if got := pciePath(tt.level); got != tt.want {
			t.Errorf("pciePath(%d) = %q, want %q", tt.level, got, tt.want)
		}
		// And through Discover.
		d0, d1 := fakeDevice(0), fakeDevice(1)
		d0.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) { return tt.level, nvml.SUCCESS }
		nodes, err := newTestSource(fakeLib(d0, d1)).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		var want []inventory.Link
		if tt.want != "" {
			want = []inventory.Link{{A: 0, B: 1, PCIe: tt.want}}
		}
		if !reflect.DeepEqual(nodes[0].Links, want) {
			t.Errorf("level %d: links = %+v, want %+v", tt.level, nodes[0].Links, want)
		}
	}
}

func TestNormBusID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"00000000:18:00.0", "0000:18:00.0"},
		{"0000:18:00.0", "0000:18:00.0"},
		{"00000000:AB:00.1", "0000:ab:00.1"},
		{"00000001:1b:02.0", "0001:1b:02.0"},
		{"NOT-A-BUS", "not-a-bus"},
	}
	for _, tt := range tests {
		if got := normBusID(tt.in); got != tt.want {
			t.Errorf("normBusID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// nvlinkEnd is where one NVLink of a fake GPU ends.
type nvlinkEnd struct {
	bus    string
	remote nvml.IntNvLinkDeviceType
	down   bool
}

// withNVLinks gives d the listed links (link l = ends[l]).
func withNVLinks(d *mock.Device, ends ...nvlinkEnd) {
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= len(ends) {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if ends[l].down {
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{BusId: cChars(ends[l].bus)}, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		return ends[l].remote, nvml.SUCCESS
	}
}

func repeat(n int, e nvlinkEnd) []nvlinkEnd {
	out := make([]nvlinkEnd, n)
	for k := range out {
		out[k] = e
	}
	return out
}

func toGPU(i int) nvlinkEnd { return nvlinkEnd{bus: fakeBusID(i), remote: nvml.NVLINK_DEVICE_TYPE_GPU} }

func toSwitch(k int) nvlinkEnd {
	return nvlinkEnd{bus: fmt.Sprintf("00000000:%02X:00.0", 0xC0+k), remote: nvml.NVLINK_DEVICE_TYPE_SWITCH}
}

func TestNVLinks(t *testing.T) {
	sys := inventory.PCIeSystem
	tests := []struct {
		name  string
		links [][]nvlinkEnd // per GPU
		noTyp bool          // the driver lacks GetNvLinkRemoteDeviceType
		want  []inventory.Link
	}{
		{
			name: "bridged pairs",
			// GPUs 0-1 and 2-3 joined by 4-link bridges, written with the
			// 4-digit domain on one side.
			links: [][]nvlinkEnd{
				repeat(4, toGPU(1)),
				repeat(4, nvlinkEnd{bus: "0000:18:00.0", remote: nvml.NVLINK_DEVICE_TYPE_GPU}),
				repeat(4, toGPU(3)),
				repeat(4, toGPU(2)),
			},
			want: []inventory.Link{
				{A: 0, B: 1, NVLinks: 4, PCIe: sys}, {A: 0, B: 2, PCIe: sys}, {A: 0, B: 3, PCIe: sys},
				{A: 1, B: 2, PCIe: sys}, {A: 1, B: 3, PCIe: sys}, {A: 2, B: 3, NVLinks: 4, PCIe: sys},
			},
		},
		{
			name: "nvswitch",
			// GPU 2 has two of its links down; GPU 3 has no NVLink.
			links: [][]nvlinkEnd{
				{toSwitch(0), toSwitch(1), toSwitch(2), toSwitch(3)},
				{toSwitch(0), toSwitch(1), toSwitch(2), toSwitch(3)},
				{toSwitch(0), {bus: "00000000:C1:00.0", down: true}, toSwitch(2), {bus: "00000000:C3:00.0", down: true}},
				nil,
			},
			want: []inventory.Link{
				{A: 0, B: 1, NVLinks: 4, PCIe: sys}, {A: 0, B: 2, NVLinks: 2, PCIe: sys}, {A: 0, B: 3, PCIe: sys},
				{A: 1, B: 2, NVLinks: 2, PCIe: sys}, {A: 1, B: 3, PCIe: sys}, {A: 2, B: 3, PCIe: sys},
			},
		},
		{
			name: "hidden GPU is no switch",
			links: [][]nvlinkEnd{
				{toGPU(1), toGPU(7)},
				{toGPU(0), toGPU(7)},
			},
			want: []inventory.Link{{A: 0, B: 1, NVLinks: 1, PCIe: sys}},
		},
		{
			name:  "old driver: unknown ends are switches",
			noTyp: true,
			links: [][]nvlinkEnd{
				{toSwitch(0), toSwitch(1), toGPU(1)},
				{toSwitch(0), toSwitch(1), toGPU(0)},
			},
			want: []inventory.Link{{A: 0, B: 1, NVLinks: 3, PCIe: sys}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs := make([]*mock.Device, len(tt.links))
			for i, ends := range tt.links {
				devs[i] = fakeDevice(i)
				if ends != nil {
					withNVLinks(devs[i], ends...)
				}
				if tt.noTyp {
					devs[i].GetNvLinkRemoteDeviceTypeFunc = nil // would panic if called
				}
			}
			lib := fakeLib(devs...)
			if tt.noTyp {
				withoutSymbols(lib, "nvmlDeviceGetNvLinkRemoteDeviceType")
			}
			nodes, err := newTestSource(lib).Discover(context.Background())
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if !reflect.DeepEqual(nodes[0].Links, tt.want) {
				t.Errorf("links = %+v\nwant %+v", nodes[0].Links, tt.want)
			}
			if err := nodes[0].Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}
