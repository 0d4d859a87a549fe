package gpunode

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/inventory"
)

// Sharing modes a GPU may be configured with (the inventory's names).
const (
	SharingShared    = inventory.SharingShared    // fractions with guarantees and limits
	SharingExclusive = inventory.SharingExclusive // whole GPUs only
	SharingMIG       = inventory.SharingMIG       // MIG instances
	// SharingMPS is fractions whose compute NVIDIA MPS caps: one MPS
	// control daemon per GPU, every container on one GPU
	// (docs/handoff.md, "MPS mode").
	SharingMPS = inventory.SharingMPS
)

// SharingModes lists the sharing modes a GPU may be published with.
func SharingModes() []string {
	return []string{SharingShared, SharingExclusive, SharingMIG, SharingMPS}
}

// ValidSharing checks a configured sharing mode.
func ValidSharing(s string) bool {
	return slices.Contains(SharingModes(), s)
}

// Object returns the GPUNode object describing node (its
// MemoryOversubscription included: the agent's --oversubscribe).
func Object(node inventory.Node, slotsPerGPU int, sharing string) *unstructured.Unstructured {
	healthy := 0
	gpus := make([]any, 0, len(node.GPUs))
	uuidOf := map[int]string{}
	for _, g := range node.GPUs {
		uuidOf[g.Index] = g.UUID
	}
	for _, g := range node.GPUs {
		if g.Health == inventory.Healthy {
			healthy++
		}
		mode := sharing
		if g.MIGMode == inventory.MIGEnabled {
			mode = SharingMIG
		}
		migs := make([]any, 0, len(g.MIGInstances))
		for _, m := range g.MIGInstances {
			mi := map[string]any{"uuid": m.UUID, "profile": m.Profile, "memoryMiB": m.MemoryMiB, "smCount": int64(m.SMCount), "inUse": m.InUse}
			if m.Start != nil {
				mi["start"] = int64(*m.Start)
			}
			migs = append(migs, mi)
		}
		peers := []any{}
		for _, l := range node.Links {
			if l.NVLinks == 0 || (l.A != g.Index && l.B != g.Index) {
				continue
			}
			other := l.A
			if other == g.Index {
				other = l.B
			}
			peers = append(peers, map[string]any{"index": int64(other), "uuid": uuidOf[other], "links": int64(l.NVLinks)})
		}
		gpus = append(gpus, map[string]any{
			"uuid": g.UUID, "index": int64(g.Index), "model": g.Model, "product": g.Product, "vendor": g.Vendor,
			"memoryMiB": g.MemoryMiB, "smCount": int64(g.SMCount), "computeCapability": g.ComputeCapability,
			"numaNode": int64(g.NUMANode), "pciBusId": g.PCIBusID, "migMode": string(g.MIGMode), "migInstances": migs, "migManaged": g.MIGManaged,
			"health": string(g.Health), "healthReason": g.HealthReason, "sharing": mode, "nvlinkPeers": peers,
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Resource().GroupVersion().String(),
		"kind":       "GPUNode",
		"metadata":   map[string]any{"name": node.Name},
		"spec":       map[string]any{"nodeName": node.Name},
		"status": map[string]any{
			"source": node.Source, "driverVersion": node.DriverVersion, "cudaVersion": node.CUDAVersion,
			"gpuCount": int64(len(node.GPUs)), "healthyCount": int64(healthy), "slotsPerGPU": int64(slotsPerGPU),
			"memoryOversubscription": node.MemoryOversubscription,
			"gpus":                   gpus,
		},
	}}
	return u
}
