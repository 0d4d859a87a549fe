// Package catalogtest provides a small, fixed catalog for tests in other
// packages, so their expectations do not move when the built-in table grows.
// It is for tests only.
package catalogtest

import "github.com/tessera-gpu/tessera/catalog"

// Small returns a catalog of four models: H200 (with two MIG profiles),
// H100-SXM and H100-PCIe (family H100) and L4.
func Small() *catalog.Catalog {
	c, err := catalog.New([]catalog.Model{
		{Vendor: catalog.NVIDIA, Name: "H200", Family: "H200", Aliases: []string{"NVIDIA H200"}, Architecture: "Hopper",
			ComputeCapability: "9.0", MemoryMiB: 143771, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: &catalog.MIGSpec{ComputeSlices: 7, MemorySlices: 8, Profiles: []catalog.MIGProfile{
				{Name: "1g.18gb", MemoryMiB: 16384, ComputeSlices: 1, MemorySlices: 1, SMCount: 16, MaxInstances: 7, Starts: []int{0, 1, 2, 3, 4, 5, 6}},
				{Name: "7g.141gb", MemoryMiB: 143360, ComputeSlices: 7, MemorySlices: 8, SMCount: 132, MaxInstances: 1, Starts: []int{0}},
			}}},
		{Vendor: catalog.NVIDIA, Name: "H100-SXM", Family: "H100", Aliases: []string{"H100"}, Architecture: "Hopper",
			ComputeCapability: "9.0", MemoryMiB: 81559, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5},
		{Vendor: catalog.NVIDIA, Name: "H100-PCIe", Family: "H100", Architecture: "Hopper",
			ComputeCapability: "9.0", MemoryMiB: 81559, SMCount: 114, NVLinkGeneration: 4, NVLinks: 12, PCIeGeneration: 5},
		{Vendor: catalog.NVIDIA, Name: "L4", Family: "L4", Architecture: "Ada Lovelace",
			ComputeCapability: "8.9", MemoryMiB: 23034, SMCount: 58, PCIeGeneration: 4},
	})
	if err != nil {
		panic("catalogtest: " + err.Error())
	}
	return c
}
