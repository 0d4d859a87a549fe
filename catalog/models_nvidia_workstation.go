package catalog

// nvidiaWorkstationModels returns NVIDIA's workstation and consumer models.
// The conventions of nvidiaModels apply. Neither model supports MIG (the
// MIG User Guide's "Supported GPUs" list has no Ada Lovelace product).
func nvidiaWorkstationModels() []Model {
	return []Model{
		// RTX 6000 Ada Generation. Source: "NVIDIA RTX 6000 Ada Generation
		// Datasheet" (48GB GDDR6 with ECC, 18176 CUDA cores = 142 SMs of 128,
		// PCIe Gen4 x16, no NVLink;
		// https://www.nvidia.com/en-us/design-visualization/rtx-6000/).
		// Memory: nvidia-smi reports 49140 MiB (ECC off, the workstation
		// default).
		{
			Vendor: NVIDIA, Name: "RTX-6000-Ada", Family: "RTX-6000-Ada",
			Aliases:      []string{"NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada Generation"},
			Architecture: "Ada Lovelace", ComputeCapability: "8.9",
			MemoryMiB: 49140, SMCount: 142, PCIeGeneration: 4,
		},
		// GeForce RTX 4090. Source: "NVIDIA Ada GPU Architecture" whitepaper
		// (AD102, 128 SMs, 16384 CUDA cores, 24GB GDDR6X, PCIe Gen4, no
		// NVLink; https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf).
		// Memory: nvidia-smi reports 24564 MiB.
		{
			Vendor: NVIDIA, Name: "RTX-4090", Family: "RTX-4090",
			Aliases:      []string{"NVIDIA GeForce RTX 4090", "GeForce RTX 4090"},
			Architecture: "Ada Lovelace", ComputeCapability: "8.9",
			MemoryMiB: 24564, SMCount: 128, PCIeGeneration: 4,
		},
	}
}
