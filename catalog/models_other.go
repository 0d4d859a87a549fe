package catalog

// otherModels returns the AMD and Intel models.
//
// For AMD, SMCount holds compute units, ComputeCapability the LLVM target
// (gfx ISA), and NVLinkGeneration/NVLinks the AMD Infinity Fabric generation and
// link count. Neither vendor's datasheet figure here comes from a running
// device: MemoryMiB is the datasheet capacity with the vendor's "GB" read as
// GiB (HBM stacks are binary-sized; ROCm's GPU specification table states
// MI300X and MI250X memory in GiB).
func otherModels() []Model {
	return []Model{
		// Instinct MI300X. Sources: "AMD Instinct MI300X Accelerator" data
		// sheet (192GB HBM3, 304 CUs, 7 x16 AMD Infinity Fabric links, PCIe
		// Gen5 x16, 4th-generation Infinity Fabric;
		// https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html)
		// and ROCm's "AMD GPU specifications" table (CDNA3, gfx942, 192 GiB,
		// 304 CUs; https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html).
		{
			Vendor: AMD, Name: "MI300X", Family: "MI300X",
			Aliases:      []string{"AMD Instinct MI300X", "Instinct MI300X", "MI300X-192GB"},
			Architecture: "CDNA 3", ComputeCapability: "gfx942",
			MemoryMiB: 196608, SMCount: 304, NVLinkGeneration: 4, NVLinks: 7, PCIeGeneration: 5,
		},
		// Instinct MI250X (OAM, two graphics compute dies). Sources: "AMD
		// Instinct MI200 Series" data sheet (128GB HBM2e, 220 CUs, up to 8 AMD
		// Infinity Fabric links, 3rd-generation Infinity Fabric, PCIe Gen4
		// x16; https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html)
		// and ROCm's "AMD GPU specifications" table (CDNA2, gfx90a). Figures
		// are for the whole package: ROCm shows each die as its own device
		// with 64 GiB and 110 CUs.
		{
			Vendor: AMD, Name: "MI250X", Family: "MI250X",
			Aliases:      []string{"AMD Instinct MI250X", "Instinct MI250X", "MI250X-128GB"},
			Architecture: "CDNA 2", ComputeCapability: "gfx90a",
			MemoryMiB: 131072, SMCount: 220, NVLinkGeneration: 3, NVLinks: 8, PCIeGeneration: 4,
		},
		// Gaudi 3. Source: "Intel Gaudi 3 AI Accelerator White Paper" (128GB
		// HBM2e, 64 tensor processor cores (TPCs) and 8 matrix engines, 24
		// integrated 200GbE RoCE ports, PCIe Gen5 x16;
		// https://www.intel.com/content/www/us/en/content-details/817486/intel-gaudi-3-ai-accelerator-white-paper.html).
		// SMCount holds the 64 TPCs. Gaudi has no NVLink-style fabric (its
		// scale-out links are Ethernet) and no published compute capability.
		{
			Vendor: Intel, Name: "Gaudi3", Family: "Gaudi3",
			Aliases:      []string{"Intel Gaudi 3", "Intel Gaudi 3 AI Accelerator"},
			Architecture: "Gaudi 3",
			MemoryMiB:    131072, SMCount: 64, PCIeGeneration: 5,
		},
	}
}
