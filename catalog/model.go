package catalog

import "strings"

// Vendor names the company that makes an accelerator.
type Vendor string

// Vendors known to the catalog.
const (
	NVIDIA Vendor = "NVIDIA"
	AMD    Vendor = "AMD"
	Intel  Vendor = "Intel"
)

// Model describes one accelerator model as its vendor's datasheet gives it.
type Model struct {
	// Vendor makes the model.
	Vendor Vendor `json:"vendor"`
	// Name is the canonical short name used everywhere in Tessera, e.g. "H200"
	// or "A100-80GB". It is unique across the catalog.
	Name string `json:"name"`
	// Family groups variants of one chip sold in several forms ("H100" for
	// H100-SXM, H100-PCIe and H100-NVL). A filter or model constraint that
	// names a family matches all its members.
	Family string `json:"family"`
	// Aliases are other names the model is known by: marketing names, NVML's
	// product strings ("NVIDIA H200"), SKU names ("H200-SXM-141GB") and the
	// names used by public traces ("V100M32"). Matching is case-insensitive.
	Aliases []string `json:"aliases,omitempty"`
	// Architecture is the vendor's architecture name ("Hopper", "CDNA 3").
	Architecture string `json:"architecture"`
	// ComputeCapability is the CUDA compute capability for NVIDIA models
	// ("9.0") and the ISA target for others ("gfx942"); empty when the
	// vendor publishes none.
	ComputeCapability string `json:"computeCapability,omitempty"`
	// MemoryMiB is the device memory in MiB (1 GiB = 1024 MiB; datasheets that
	// state decimal GB are converted and say so in the entry's comment).
	MemoryMiB int64 `json:"memoryMiB"`
	// SMCount is the number of streaming multiprocessors (NVIDIA), compute
	// units (AMD) or matrix and tensor cores (Intel Gaudi) enabled on the product.
	SMCount int `json:"smCount"`
	// NVLinkGeneration is the NVLink generation (0 when the model has none).
	// For AMD models it is the Infinity Fabric generation; for Gaudi, 0.
	NVLinkGeneration int `json:"nvlinkGeneration,omitempty"`
	// NVLinks is the number of NVLink links per GPU (18 on H100 SXM, 12 on
	// A100 SXM); 0 when the model has none. PCIe cards with an NVLink bridge
	// count the bridge's links.
	NVLinks int `json:"nvlinks,omitempty"`
	// PCIeGeneration is the host interface's PCIe generation.
	PCIeGeneration int `json:"pcieGeneration"`
	// MIG is the model's Multi-Instance GPU geometry; nil when unsupported.
	MIG *MIGSpec `json:"mig,omitempty"`
	// Common marks the models `tessera show-gpus` lists without --all.
	Common bool `json:"common"`
}

// MIGSpec is the Multi-Instance GPU geometry of a model.
type MIGSpec struct {
	// ComputeSlices is the number of GPU (compute) slices the device splits into (7 on A100/H100).
	ComputeSlices int `json:"computeSlices"`
	// MemorySlices is the number of memory slices (8 on A100/H100).
	MemorySlices int `json:"memorySlices"`
	// Profiles are the GPU instance profiles the device offers.
	Profiles []MIGProfile `json:"profiles"`
}

// MIGProfile is one MIG GPU-instance profile, named as nvidia-smi names it ("1g.10gb").
type MIGProfile struct {
	Name          string `json:"name"`
	MemoryMiB     int64  `json:"memoryMiB"`
	ComputeSlices int    `json:"computeSlices"`
	// MemorySlices is also the instance's placement size: the number of
	// consecutive memory slices it occupies from its start slot (the
	// ":size" of `nvidia-smi mig -lgipp`).
	MemorySlices int `json:"memorySlices"`
	SMCount      int `json:"smCount"`
	MaxInstances int `json:"maxInstances"`
	// Starts are the memory slices an instance of the profile may start at
	// (the "{starts}" of `nvidia-smi mig -lgipp`), ascending. An instance
	// at start s occupies slices s .. s+MemorySlices-1.
	Starts []int `json:"starts"`
}

// MediaExtended reports whether the profile is a media-extension variant
// ("1g.10gb+me"): it takes the GPU's single set of media engines (OFA,
// JPEG, and on Hopper NVENC), so a GPU holds at most one such instance.
func (p MIGProfile) MediaExtended() bool {
	n := p.Name
	return len(n) >= 3 && strings.EqualFold(n[len(n)-3:], "+me")
}

// SupportsMIG reports whether the model can be partitioned with MIG.
func (m *Model) SupportsMIG() bool { return m.MIG != nil && len(m.MIG.Profiles) > 0 }

// MIGProfile returns the named MIG profile of the model, if it has one.
func (m *Model) MIGProfile(name string) (MIGProfile, bool) {
	if m.MIG == nil {
		return MIGProfile{}, false
	}
	for _, p := range m.MIG.Profiles {
		if equalFold(p.Name, name) {
			return p, true
		}
	}
	return MIGProfile{}, false
}
