package catalog

// builtinModels returns the compiled-in model table. Each call returns a
// fresh slice so no caller can change another's catalog.
func builtinModels() []Model {
	out := nvidiaModels()
	out = append(out, nvidiaWorkstationModels()...)
	return append(out, otherModels()...)
}

// nvidiaModels returns NVIDIA's data-center models.
//
// Conventions for every NVIDIA entry:
//   - MemoryMiB is the total NVML reports (nvidia-smi "memory.total") as seen
//     in publicly posted nvidia-smi output for that product, not a datasheet
//     figure; each comment gives the datasheet capacity beside it. Cards with
//     switchable ECC (A10, L40) report less with ECC on; the ECC-on figure is
//     used for data-center cards since that is how they ship.
//   - ComputeCapability is from NVIDIA's "CUDA GPUs - Compute Capability"
//     table (https://developer.nvidia.com/cuda-gpus).
//   - NVLinks counts links per GPU: NVLink 3 and 4 links carry 50 GB/s
//     (both directions), NVLink 5 links 100 GB/s, NVLink 2 links 50 GB/s, so a
//     datasheet's "NVLink: 600GB/s" is 12 links. Bridged PCIe cards count the
//     bridge's links.
//   - Where a datasheet gives CUDA cores rather than SMs, SMCount is cores per
//     SM divided out (64 per SM on GP100, GV100, TU10x and GA100; 128 on
//     GA10x, AD10x and GH100) and the comment says so.
//   - Aliases hold NVML's product string (what nvidia-smi --query-gpu=name
//     prints), older or alternative NVML strings, SKU-style names and the
//     strings go-nvml's mock servers report.
func nvidiaModels() []Model {
	return []Model{
		// B200. Sources: "NVIDIA DGX B200 Datasheet" (180GB HBM3e per GPU,
		// NVLink 5 at 1.8 TB/s = 18 links; https://www.nvidia.com/en-us/data-center/dgx-b200/),
		// MIG User Guide "Supported GPUs" (B200, GB100, CC 10.0, 180GB, 7
		// instances). Memory: nvidia-smi reports 183359 MiB. SMs: 148 per
		// CUDA's multiprocessor count (public deviceQuery-style output and
		// JAX's GPU spec table); NVIDIA's datasheet does not state it.
		// PCIe: Gen6 host interface per secondary sources (NVIDIA's datasheet
		// does not list it): not confirmed from an NVIDIA document.
		{
			Vendor: NVIDIA, Name: "B200", Family: "B200",
			Aliases:      []string{"NVIDIA B200", "NVIDIA B200 180GB HBM3e", "B200-SXM-180GB", "HGX B200"},
			Architecture: "Blackwell", ComputeCapability: "10.0",
			MemoryMiB: 183359, SMCount: 148, NVLinkGeneration: 5, NVLinks: 18, PCIeGeneration: 6,
			MIG: b200MIG(), Common: true,
		},
		// H200 SXM. Source: "NVIDIA H200 Tensor Core GPU" datasheet (141GB
		// HBM3e, NVLink 900GB/s = 18 links, PCIe Gen5;
		// https://www.nvidia.com/en-us/data-center/h200/). Memory: nvidia-smi
		// reports 143771 MiB. SMs: 132, the same GH100 configuration as H100
		// SXM5 (NVIDIA's datasheet does not state it; CUDA reports 132).
		// "NVIDIA H200 141GB HBM3e" is what go-nvml's dgxh200 mock and JAX's
		// GPU table report; current drivers print "NVIDIA H200".
		{
			Vendor: NVIDIA, Name: "H200", Family: "H200",
			Aliases: []string{"NVIDIA H200", "NVIDIA H200 141GB HBM3e", "H200-SXM", "H200-SXM5",
				"H200-SXM-141GB", "H200-SXM5-141GB"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 143771, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: h200MIG(), Common: true,
		},
		// H200 NVL (PCIe card). Source: "NVIDIA H200 Tensor Core GPU"
		// datasheet, H200 NVL column (141GB HBM3e, 2- or 4-way NVLink bridge
		// at 900GB/s = 18 links, PCIe Gen5;
		// https://www.nvidia.com/en-us/data-center/h200/). Memory: nvidia-smi
		// reports 143771 MiB. SMs: 132 per third-party listings; not confirmed
		// from an NVIDIA document.
		{
			Vendor: NVIDIA, Name: "H200-NVL", Family: "H200",
			Aliases:      []string{"NVIDIA H200 NVL", "H200-NVL-141GB", "H200-PCIe-141GB", "NVIDIA H200 PCIe 141GB"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 143771, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: h200MIG(),
		},
		// H100 SXM5 80GB. Sources: "NVIDIA H100 Tensor Core GPU Datasheet"
		// (80GB HBM3, NVLink 900GB/s = 18 links, PCIe Gen5;
		// https://www.nvidia.com/en-us/data-center/h100/) and "NVIDIA H100
		// Tensor Core GPU Architecture" whitepaper (132 SMs on SXM5).
		// Memory: nvidia-smi reports 81559 MiB.
		{
			Vendor: NVIDIA, Name: "H100-SXM", Family: "H100",
			Aliases: []string{"NVIDIA H100 80GB HBM3", "H100", "H100-SXM5", "H100-SXM5-80GB",
				"H100-SXM-80GB", "NVIDIA H100 SXM"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 81559, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: h100SXMMIG(), Common: true,
		},
		// H100 PCIe 80GB. Sources: "NVIDIA H100 Tensor Core GPU Datasheet"
		// (80GB HBM2e, NVLink bridge 600GB/s = 12 links, PCIe Gen5) and the
		// Hopper whitepaper (114 SMs on PCIe). Memory: nvidia-smi reports
		// 81559 MiB (driver 570.169).
		{
			Vendor: NVIDIA, Name: "H100-PCIe", Family: "H100",
			Aliases:      []string{"NVIDIA H100 PCIe", "H100-PCIE-80GB"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 81559, SMCount: 114, NVLinkGeneration: 4, NVLinks: 12, PCIeGeneration: 5,
			MIG: h100PCIeMIG(),
		},
		// H100 NVL 94GB. Source: "NVIDIA H100 NVL GPU Product Brief"
		// (PB-11773-001; 94GB HBM3, NVLink bridge 600GB/s = 12 links, PCIe
		// Gen5; https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/h100/PB-11773-001_v01.pdf).
		// Memory: nvidia-smi reports 95830 MiB. SMs: 132 (CUDA
		// multiProcessorCount and the 7g.94gb MIG profile both report 132).
		{
			Vendor: NVIDIA, Name: "H100-NVL", Family: "H100",
			Aliases:      []string{"NVIDIA H100 NVL", "H100-NVL-94GB"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 95830, SMCount: 132, NVLinkGeneration: 4, NVLinks: 12, PCIeGeneration: 5,
			MIG: h100NVLMIG(),
		},
		// H20 96GB. NVIDIA publishes no public datasheet for the H20. The MIG
		// User Guide "Supported GPUs" lists it (GH100, CC 9.0, 96GB, 7
		// instances). Memory: nvidia-smi reports 97871 MiB. NOT CONFIRMED from
		// an NVIDIA document: 78 SMs (third-party benchmark reports), NVLink
		// 900GB/s = 18 links and PCIe Gen5 (partner and press spec sheets).
		{
			Vendor: NVIDIA, Name: "H20", Family: "H20",
			Aliases:      []string{"NVIDIA H20", "H20-SXM5-96GB", "H20 96GB"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 97871, SMCount: 78, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: h20MIG(),
		},
		// GH200 Grace Hopper Superchip, 96GB HBM3 version (the GPU part).
		// Source: "NVIDIA GH200 Grace Hopper Superchip Datasheet" (96GB HBM3,
		// NVLink-C2C 900GB/s to Grace, PCIe Gen5 links on the superchip;
		// https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/).
		// Memory: nvidia-smi reports 97871 MiB for "NVIDIA GH200 480GB".
		// SMs: 132 (OpenCL reports 132 compute units, the 7g.96gb MIG profile
		// 132 SMs). NVLinks: the GPU's 18 NVLink
		// 4 links for the NVLink Switch System; not stated per GPU in the
		// datasheet. The 144GB HBM3e version reports a different name and is
		// not in this table.
		{
			Vendor: NVIDIA, Name: "GH200", Family: "GH200",
			Aliases:      []string{"NVIDIA GH200 480GB", "NVIDIA GH200", "GH200-96GB", "GH200 Grace Hopper Superchip"},
			Architecture: "Hopper", ComputeCapability: "9.0",
			MemoryMiB: 97871, SMCount: 132, NVLinkGeneration: 4, NVLinks: 18, PCIeGeneration: 5,
			MIG: gh200MIG(),
		},
		// A100 40GB (SXM4 and PCIe). Sources: "NVIDIA A100 Tensor Core GPU
		// Datasheet" (40GB HBM2, NVLink 600GB/s = 12 links, PCIe Gen4;
		// https://www.nvidia.com/en-us/data-center/a100/) and the "NVIDIA A100
		// Tensor Core GPU Architecture" whitepaper (108 SMs). Memory:
		// nvidia-smi reports 40960 MiB on current drivers (R450 printed
		// 40537). "Mock NVIDIA A100-SXM4-40GB" is the name go-nvml's dgxa100
		// mock server reports; it is kept so simulated A100 hosts resolve.
		{
			Vendor: NVIDIA, Name: "A100-40GB", Family: "A100",
			Aliases: []string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "A100-SXM4-40GB",
				"A100-PCIE-40GB", "Mock NVIDIA A100-SXM4-40GB"},
			Architecture: "Ampere", ComputeCapability: "8.0",
			MemoryMiB: 40960, SMCount: 108, NVLinkGeneration: 3, NVLinks: 12, PCIeGeneration: 4,
			MIG: a100With40GBMIG(), Common: true,
		},
		// A100 80GB (SXM4 and PCIe). Sources: "NVIDIA A100 Tensor Core GPU
		// Datasheet" (80GB HBM2e, NVLink 600GB/s = 12 links, PCIe Gen4) and the
		// A100 whitepaper (108 SMs). Memory: nvidia-smi reports 81920 MiB.
		// "NVIDIA A100-PCIE-80GB" is what go-nvml's gpus mock reports; the
		// real PCIe card reports "NVIDIA A100 80GB PCIe".
		{
			Vendor: NVIDIA, Name: "A100-80GB", Family: "A100",
			Aliases: []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB",
				"A100-SXM4-80GB", "A100-SXM-80GB", "A100-PCIE-80GB"},
			Architecture: "Ampere", ComputeCapability: "8.0",
			MemoryMiB: 81920, SMCount: 108, NVLinkGeneration: 3, NVLinks: 12, PCIeGeneration: 4,
			MIG: a100With80GBMIG(), Common: true,
		},
		// A30. Source: "NVIDIA A30 Tensor Core GPU Datasheet" (24GB HBM2,
		// third-generation NVLink bridge 200GB/s = 4 links, PCIe Gen4;
		// https://www.nvidia.com/en-us/data-center/products/a30-gpu/).
		// Memory: nvidia-smi reports 24576 MiB. SMs: 56 (the 4g.24gb MIG
		// profile, which spans the whole GPU, reports 56).
		{
			Vendor: NVIDIA, Name: "A30", Family: "A30",
			Aliases:      []string{"NVIDIA A30", "NVIDIA A30-PCIE-24GB", "A30-24GB"},
			Architecture: "Ampere", ComputeCapability: "8.0",
			MemoryMiB: 24576, SMCount: 56, NVLinkGeneration: 3, NVLinks: 4, PCIeGeneration: 4,
			MIG: a30MIG(),
		},
		// A10. Source: "NVIDIA A10 Tensor Core GPU Datasheet" (24GB GDDR6,
		// 72 RT cores, one per SM, so 72 SMs (9216 CUDA cores / 128), PCIe
		// Gen4, no NVLink;
		// https://www.nvidia.com/en-us/data-center/products/a10-gpu/).
		// Memory: nvidia-smi reports 23028 MiB with ECC on (24564 MiB off).
		{
			Vendor: NVIDIA, Name: "A10", Family: "A10",
			Aliases:      []string{"NVIDIA A10", "A10-24GB"},
			Architecture: "Ampere", ComputeCapability: "8.6",
			MemoryMiB: 23028, SMCount: 72, PCIeGeneration: 4,
		},
		// A10G, the AWS EC2 G5 part. NVIDIA publishes no datasheet for it;
		// AWS's G5 page (https://aws.amazon.com/ec2/instance-types/g5/) gives
		// 24GB GDDR6 and PCIe-attached GPUs. Memory: nvidia-smi reports 23028
		// MiB. NOT CONFIRMED: 80 SMs (community reports; some third-party
		// tables give 72 like the A10) and PCIe Gen4 (that of GA102 boards).
		{
			Vendor: NVIDIA, Name: "A10G", Family: "A10G",
			Aliases:      []string{"NVIDIA A10G", "A10G-24GB"},
			Architecture: "Ampere", ComputeCapability: "8.6",
			MemoryMiB: 23028, SMCount: 80, PCIeGeneration: 4, Common: true,
		},
		// L40S. Source: "NVIDIA L40S GPU Datasheet" (48GB GDDR6 with ECC,
		// 18176 CUDA cores = 142 SMs of 128, PCIe Gen4 x16, no NVLink;
		// https://www.nvidia.com/en-us/data-center/l40s/). Memory: nvidia-smi
		// reports 46068 MiB.
		{
			Vendor: NVIDIA, Name: "L40S", Family: "L40S",
			Aliases:      []string{"NVIDIA L40S", "L40S-48GB"},
			Architecture: "Ada Lovelace", ComputeCapability: "8.9",
			MemoryMiB: 46068, SMCount: 142, PCIeGeneration: 4, Common: true,
		},
		// L40. Source: "NVIDIA L40 GPU Datasheet" (48GB GDDR6 with ECC,
		// 18176 CUDA cores = 142 SMs of 128, PCIe Gen4 x16, no NVLink;
		// https://www.nvidia.com/en-us/data-center/l40/). Memory: nvidia-smi
		// reports 46068 MiB with ECC on (49140 MiB off).
		{
			Vendor: NVIDIA, Name: "L40", Family: "L40",
			Aliases:      []string{"NVIDIA L40", "L40-48GB"},
			Architecture: "Ada Lovelace", ComputeCapability: "8.9",
			MemoryMiB: 46068, SMCount: 142, PCIeGeneration: 4,
		},
		// L4. Source: "NVIDIA L4 Tensor Core GPU Datasheet" (24GB GDDR6, PCIe
		// Gen4 x16, no NVLink; https://www.nvidia.com/en-us/data-center/l4/).
		// Memory: nvidia-smi reports 23034 MiB. NOT CONFIRMED from an NVIDIA
		// document: 58 SMs (7424 CUDA cores / 128, as third-party listings
		// give it).
		{
			Vendor: NVIDIA, Name: "L4", Family: "L4",
			Aliases:      []string{"NVIDIA L4", "L4-24GB"},
			Architecture: "Ada Lovelace", ComputeCapability: "8.9",
			MemoryMiB: 23034, SMCount: 58, PCIeGeneration: 4, Common: true,
		},
		// T4. Source: "NVIDIA T4 Tensor Core GPU Datasheet" (16GB GDDR6, 2560
		// CUDA cores = 40 SMs of 64, PCIe Gen3 x16, no NVLink;
		// https://www.nvidia.com/en-us/data-center/tesla-t4/). Memory:
		// nvidia-smi reports 15360 MiB.
		{
			Vendor: NVIDIA, Name: "T4", Family: "T4",
			Aliases:      []string{"Tesla T4", "NVIDIA T4", "T4-16GB"},
			Architecture: "Turing", ComputeCapability: "7.5",
			MemoryMiB: 15360, SMCount: 40, PCIeGeneration: 3, Common: true,
		},
		// V100 16GB. Source: "NVIDIA Tesla V100 GPU Datasheet" (16GB HBM2,
		// 5120 CUDA cores = 80 SMs of 64, NVLink 300GB/s = 6 NVLink 2 links on
		// SXM2, PCIe Gen3; https://www.nvidia.com/en-us/data-center/v100/).
		// Memory: nvidia-smi reports 16384 MiB on current drivers (older ones
		// 16160). The PCIe card ("Tesla V100-PCIE-16GB") has no NVLink; it is
		// folded into this entry, whose link count describes the SXM2 part.
		// "V100M16" is the name used in Alibaba's public cluster traces.
		{
			Vendor: NVIDIA, Name: "V100-16GB", Family: "V100",
			Aliases: []string{"Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB", "V100-SXM2-16GB",
				"V100-PCIE-16GB", "V100M16"},
			Architecture: "Volta", ComputeCapability: "7.0",
			MemoryMiB: 16384, SMCount: 80, NVLinkGeneration: 2, NVLinks: 6, PCIeGeneration: 3,
		},
		// V100 32GB. Source: "NVIDIA Tesla V100 GPU Datasheet" (32GB HBM2,
		// 80 SMs, 6 NVLink 2 links on SXM2, PCIe Gen3). Memory: nvidia-smi
		// reports 32768 MiB. PCIe and DGX-2 (SXM3) variants are folded in as
		// for the 16GB entry. "V100M32" is the Alibaba trace name.
		{
			Vendor: NVIDIA, Name: "V100-32GB", Family: "V100",
			Aliases: []string{"Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB", "Tesla V100-SXM3-32GB",
				"V100-SXM2-32GB", "V100-PCIE-32GB", "V100M32"},
			Architecture: "Volta", ComputeCapability: "7.0",
			MemoryMiB: 32768, SMCount: 80, NVLinkGeneration: 2, NVLinks: 6, PCIeGeneration: 3,
		},
		// P100 16GB PCIe. Source: "NVIDIA Tesla P100 PCIe Datasheet" (16GB
		// CoWoS HBM2, 3584 CUDA cores = 56 SMs of 64, PCIe Gen3, no NVLink on
		// the PCIe card; https://www.nvidia.com/en-us/data-center/tesla-p100/).
		// Memory: nvidia-smi reports 16384 MiB on current drivers (older ones
		// 16280).
		{
			Vendor: NVIDIA, Name: "P100", Family: "P100",
			Aliases:      []string{"Tesla P100-PCIE-16GB", "P100-PCIE-16GB", "P100 16GB"},
			Architecture: "Pascal", ComputeCapability: "6.0",
			MemoryMiB: 16384, SMCount: 56, PCIeGeneration: 3,
		},
	}
}
