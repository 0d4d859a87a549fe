package catalog

// MIG geometry of the NVIDIA models that support Multi-Instance GPU.
//
// Profile names, compute and memory slices and maximum instance counts come
// from NVIDIA's "Multi-Instance GPU User Guide", section "Supported MIG
// Profiles" (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html),
// and the product list in its "Supported GPUs" section
// (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-gpus.html).
// The guide gives only fractions (1/7 of the SMs, 1/8 of the memory), so the
// SM count and memory of each profile are taken from `nvidia-smi mig -lgip`
// output (column "Memory GiB", converted to MiB at 1024 MiB per GiB, and
// column "SM") as published for each product; each table says where its
// figures come from and which could not be confirmed. The lgip memory column
// moves by about ±0.25 GiB between driver releases.
//
// Every function returns a freshly allocated spec so callers cannot share state.

// mig is shorthand for one profile row: name, memory (MiB), compute slices,
// memory slices (also the placement size), SMs, maximum instances, valid
// start slots.
func mig(name string, memMiB int64, computeSlices, memorySlices, sms, maxInstances int, starts ...int) MIGProfile {
	return MIGProfile{Name: name, MemoryMiB: memMiB, ComputeSlices: computeSlices,
		MemorySlices: memorySlices, SMCount: sms, MaxInstances: maxInstances, Starts: starts}
}

// Placements (start slots and sizes).
//
// Every 7-compute/8-memory-slice GPU below has the same placement table,
// the one `nvidia-smi mig -lgipp` prints on an A100-SXM4-40GB in the MIG
// User Guide, "Getting Started with MIG", "List GPU Instance Profiles"
// (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/getting-started-with-mig.html),
// and that its "Profile Placements" figures draw for each model:
//
//	1g, 1g+me (1 memory slice)      starts 0,1,2,3,4,5,6   size 1
//	1g with 2 memory slices         starts 0,2,4,6         size 2
//	2g                              starts 0,2,4           size 2
//	3g                              starts 0,4             size 4
//	4g                              start  0               size 4
//	7g                              start  0               size 8
//
// Slice 7 holds memory only: no 1-slice profile starts there, so seven
// 1g instances leave it empty. Published lgipp output confirms the table
// for A100-40GB (the guide), A100-80GB (driver R470-era output listing
// profiles 19, 20, 14, 9, 5, 0 with these placements) and H100 NVL
// (Colfax Research, "Sharing NVIDIA GPUs at the System Level", 2024,
// driver 560.35.03, all seven profiles). NOT CONFIRMED by lgipp output:
// H100 80GB (SXM5, PCIe), H200, H200 NVL, GH200, H20 and B200, for which
// the start slots come from the guide's placement figures only. go-nvml's
// mock H100 (3g of size 3, 7g of size 7) disagrees with the guide and is
// not used.
//
// Placement rules the guide states beside the tables, all checked by
// MIGSpec.CheckLayout:
//   - instances may not overlap in memory slices, and each starts at one of
//     its profile's starts;
//   - at most one "+me" instance per GPU ("A single 1g profile can include
//     media extensions"; the GPU has one OFA and, on Hopper, one set of
//     encoders);
//   - the (4 memory, 4 compute) plus (4 memory, 3 compute) combination
//     (4g@0 + 3g@4) is valid on R510 and later drivers (it was refused
//     before);
//   - creation order matters only when the driver picks the placement:
//     the guide's 3-2-1-1 example (`nvidia-smi mig -cgi 19,19,14,9`) fails
//     with "Insufficient Resources" because the driver put the 1g and 2g
//     instances where both 3g starts are blocked, and succeeds as
//     `-cgi 9,19,14,19`. Tessera always names the start slot
//     (nvmlDeviceCreateGpuInstanceWithPlacement), so with explicit starts a
//     valid layout can be built in any order (catalog_mig_test.go checks
//     both).

// sevenSlice wraps profiles in the 7-compute-slice / 8-memory-slice geometry
// shared by A100, H100, H200, H20, GH200 and B200.
func sevenSlice(profiles ...MIGProfile) *MIGSpec {
	return &MIGSpec{ComputeSlices: 7, MemorySlices: 8, Profiles: profiles}
}

// a100With40GBMIG: A100-SXM4-40GB / A100-PCIE-40GB. Geometry: MIG User Guide,
// "A100 MIG Profiles" table. Memory and SMs: published `nvidia-smi mig -lgip`
// output for A100-SXM4-40GB, the form the guide's getting-started example
// shows (4.75 / 9.62 / 19.50 / 39.25 GiB; 14 SMs per compute slice, 98 SMs for
// 7g). Other published outputs print 9.75 / 19.62 / 39.50 GiB for the same
// profiles. 1g.10gb needs an R525 or later driver.
func a100With40GBMIG() *MIGSpec {
	return sevenSlice(
		mig("1g.5gb", 4864, 1, 1, 14, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.5gb+me", 4864, 1, 1, 14, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb", 9856, 1, 2, 14, 4, 0, 2, 4, 6),
		mig("2g.10gb", 9856, 2, 2, 28, 3, 0, 2, 4),
		mig("3g.20gb", 19968, 3, 4, 42, 2, 0, 4),
		mig("4g.20gb", 19968, 4, 4, 56, 1, 0),
		mig("7g.40gb", 40192, 7, 8, 98, 1, 0),
	)
}

// a100With80GBMIG: A100-SXM4-80GB / A100 80GB PCIe. Geometry: MIG User Guide,
// "A100 MIG Profiles" (names scaled to 80GB as the guide says). Memory and
// SMs: published `nvidia-smi mig -lgip` output for A100 80GB (9.50 / 19.50 /
// 39.25 / 79.00 GiB; 14 / 28 / 42 / 56 / 98 SMs). 1g.20gb (R525+) does not
// appear in that output; its memory is taken equal to 2g.20gb's (same two
// memory slices) and its SMs to one compute slice's: not confirmed.
func a100With80GBMIG() *MIGSpec {
	return sevenSlice(
		mig("1g.10gb", 9728, 1, 1, 14, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb+me", 9728, 1, 1, 14, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.20gb", 19968, 1, 2, 14, 4, 0, 2, 4, 6),
		mig("2g.20gb", 19968, 2, 2, 28, 3, 0, 2, 4),
		mig("3g.40gb", 40192, 3, 4, 42, 2, 0, 4),
		mig("4g.40gb", 40192, 4, 4, 56, 1, 0),
		mig("7g.80gb", 80896, 7, 8, 98, 1, 0),
	)
}

// a30MIG: A30 24GB, 4 compute slices and 4 memory slices. Geometry: MIG User
// Guide, "A30 MIG Profiles". Memory and SMs: published `nvidia-smi mig -lgip`
// output for A30 (5.81 / 11.69 / 23.44 GiB; 14 / 28 / 56 SMs). Placements:
// published `nvidia-smi mig -lgipp` output for "NVIDIA A30", driver
// 535.183.01: 1g.6gb and 1g.6gb+me {0,1,2,3}:1, 2g.12gb and 2g.12gb+me
// {0,2}:2, 4g.24gb {0}:4; the +me profiles share one media engine set
// (at most one of them per GPU).
func a30MIG() *MIGSpec {
	return &MIGSpec{ComputeSlices: 4, MemorySlices: 4, Profiles: []MIGProfile{
		mig("1g.6gb", 5952, 1, 1, 14, 4, 0, 1, 2, 3),
		mig("1g.6gb+me", 5952, 1, 1, 14, 1, 0, 1, 2, 3),
		mig("2g.12gb", 11968, 2, 2, 28, 2, 0, 2),
		mig("2g.12gb+me", 11968, 2, 2, 28, 1, 0, 2),
		mig("4g.24gb", 24000, 4, 4, 56, 1, 0),
	}}
}

// h100SXMMIG: H100 80GB HBM3 (SXM5). Geometry: MIG User Guide, "H100 MIG
// Profiles". Memory and SMs: published `nvidia-smi mig -lgip` output for
// "NVIDIA H100 80GB HBM3" (9.75 / 19.62 / 39.50 / 79.25 GiB; 16 / 16 / 26 / 32
// / 60 / 64 / 132 SMs).
func h100SXMMIG() *MIGSpec {
	return sevenSlice(
		mig("1g.10gb", 9984, 1, 1, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb+me", 9984, 1, 1, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.20gb", 20096, 1, 2, 26, 4, 0, 2, 4, 6),
		mig("2g.20gb", 20096, 2, 2, 32, 3, 0, 2, 4),
		mig("3g.40gb", 40448, 3, 4, 60, 2, 0, 4),
		mig("4g.40gb", 40448, 4, 4, 64, 1, 0),
		mig("7g.80gb", 81152, 7, 8, 132, 1, 0),
	)
}

// h100PCIeMIG: H100 PCIe 80GB. Same profile names and memory as the SXM5
// part; fewer SMs. Memory and SMs: published `nvidia-smi mig -lgip` output for
// "NVIDIA H100 PCIe", driver 570.169 (9.75 / 19.62 / 39.50 / 79.25 GiB;
// 14 / 14 / 14 / 30 / 46 / 62 / 114 SMs).
func h100PCIeMIG() *MIGSpec {
	return sevenSlice(
		mig("1g.10gb", 9984, 1, 1, 14, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb+me", 9984, 1, 1, 14, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.20gb", 20096, 1, 2, 14, 4, 0, 2, 4, 6),
		mig("2g.20gb", 20096, 2, 2, 30, 3, 0, 2, 4),
		mig("3g.40gb", 40448, 3, 4, 46, 2, 0, 4),
		mig("4g.40gb", 40448, 4, 4, 62, 1, 0),
		mig("7g.80gb", 81152, 7, 8, 114, 1, 0),
	)
}

// h100NVLMIG: H100 NVL 94GB. Geometry: MIG User Guide, "H100 MIG Profiles",
// 94GB table. Memory and SMs: published `nvidia-smi mig -lgip` output for
// "NVIDIA H100 NVL", driver 560.35.03 (10.75 / 21.62 / 46.38 / 93.12 GiB;
// 16 / 16 / 26 / 32 / 60 / 64 / 132 SMs). Other published outputs print
// 10.62 / 21.50 / 46.12 / 92.62 GiB.
func h100NVLMIG() *MIGSpec {
	return sevenSlice(
		mig("1g.12gb", 11008, 1, 1, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.12gb+me", 11008, 1, 1, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.24gb", 22144, 1, 2, 26, 4, 0, 2, 4, 6),
		mig("2g.24gb", 22144, 2, 2, 32, 3, 0, 2, 4),
		mig("3g.47gb", 47488, 3, 4, 60, 2, 0, 4),
		mig("4g.47gb", 47488, 4, 4, 64, 1, 0),
		mig("7g.94gb", 95360, 7, 8, 132, 1, 0),
	)
}

// gh200MIG: the H100 96GB in GH200. Geometry: MIG User Guide, "H100 MIG
// Profiles", 96GB (H100 on GH200) table. Memory and SMs: published
// `nvidia-smi mig -lgip` output from a GH200 (11.00 / 23.00 / 46.50 / 93.00
// GiB; 16 / 16 / 26 / 32 / 60 / 64 / 132 SMs).
func gh200MIG() *MIGSpec {
	return sevenSlice(
		mig("1g.12gb", 11264, 1, 1, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.12gb+me", 11264, 1, 1, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.24gb", 23552, 1, 2, 26, 4, 0, 2, 4, 6),
		mig("2g.24gb", 23552, 2, 2, 32, 3, 0, 2, 4),
		mig("3g.48gb", 47616, 3, 4, 60, 2, 0, 4),
		mig("4g.48gb", 47616, 4, 4, 64, 1, 0),
		mig("7g.96gb", 95232, 7, 8, 132, 1, 0),
	)
}

// h20MIG: H20 96GB. Geometry: the H20 is in the MIG User Guide's "Supported
// GPUs" list; its profile names and instance counts are those of NVIDIA's vGPU
// documentation ("MIG-Backed NVIDIA vGPU for Compute for NVIDIA H20 SXM5
// 96GB": 1g.12gb ×7, 1g.12gb+me ×1, 1g.24gb ×4, 2g.24gb ×3, 3g.48gb ×2,
// 4g.48gb ×1, 7g.96gb ×1).
// NOT CONFIRMED: no `nvidia-smi mig -lgip` output for an H20 was found. The
// memory figures are GH200's (same 96GB HBM3 and the same 97871 MiB NVML
// total); the SM figures are estimates, 78 SMs × compute slices / 7 rounded
// down.
func h20MIG() *MIGSpec {
	return sevenSlice(
		mig("1g.12gb", 11264, 1, 1, 11, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.12gb+me", 11264, 1, 1, 11, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.24gb", 23552, 1, 2, 11, 4, 0, 2, 4, 6),
		mig("2g.24gb", 23552, 2, 2, 22, 3, 0, 2, 4),
		mig("3g.48gb", 47616, 3, 4, 33, 2, 0, 4),
		mig("4g.48gb", 47616, 4, 4, 44, 1, 0),
		mig("7g.96gb", 95232, 7, 8, 78, 1, 0),
	)
}

// h200MIG: H200 141GB, SXM5 and NVL. Geometry: MIG User Guide, "H200 MIG
// Profiles". Figures:
//   - 1g.18gb: 16.00 GiB, 16 SMs, and 2g.35gb: 32.50 GiB, 32 SMs, and
//     7g.141gb: 140.00 GiB, 132 SMs: `nvidia-smi mig -lgip` lines for H200
//     reproduced in a public test fixture (not an NVIDIA document);
//   - 1g.35gb: 26 SMs and 3g.71gb: 60 SMs as CUDA reports them on those
//     instances (public profiling reports); 3g.71gb memory is the CUDA total
//     reported on such an instance (74,893,492,224 bytes = 71424 MiB), which
//     is at most what nvidia-smi prints;
//   - NOT CONFIRMED: 1g.35gb memory (taken equal to 2g.35gb's, same two memory
//     slices), 4g.71gb memory (equal to 3g.71gb's) and 4g.71gb SMs (64, as on
//     every 132-SM GH100 part above).
//
// No lgip output for the H200 NVL was found; the H200 NVL has the same GH100
// SM count and the same NVML memory total (143771 MiB), so the same figures are
// used for it.
func h200MIG() *MIGSpec {
	return sevenSlice(
		mig("1g.18gb", 16384, 1, 1, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.18gb+me", 16384, 1, 1, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.35gb", 33280, 1, 2, 26, 4, 0, 2, 4, 6),
		mig("2g.35gb", 33280, 2, 2, 32, 3, 0, 2, 4),
		mig("3g.71gb", 71424, 3, 4, 60, 2, 0, 4),
		mig("4g.71gb", 71424, 4, 4, 64, 1, 0),
		mig("7g.141gb", 143360, 7, 8, 132, 1, 0),
	)
}

// b200MIG: B200 180GB. Geometry: MIG User Guide, "B200 MIG Profiles".
// Figures: 1g.23gb is 20992 MiB as nvidia-smi reports it on a B200 MIG 1g.23gb
// instance (public job log) and 18 SMs (the "NVIDIA B200 MIG 1g.23gb" entry of
// JAX's GPU spec table). NOT CONFIRMED: every other figure. No lgip output for
// B200 was found, so they are lower bounds, not measurements: memory is
// memory slices × 20992 MiB and SMs are compute slices × 18 (on every GPU above
// a profile has at least that much; H100's 3g has 60 SMs, not 3 × 16).
func b200MIG() *MIGSpec {
	return sevenSlice(
		mig("1g.23gb", 20992, 1, 1, 18, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.23gb+me", 20992, 1, 1, 18, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.45gb", 41984, 1, 2, 18, 4, 0, 2, 4, 6),
		mig("2g.45gb", 41984, 2, 2, 36, 3, 0, 2, 4),
		mig("3g.90gb", 83968, 3, 4, 54, 2, 0, 4),
		mig("4g.90gb", 83968, 4, 4, 72, 1, 0),
		mig("7g.180gb", 167936, 7, 8, 126, 1, 0),
	)
}
