package gpunode

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/inventory"
)

// status is the typed form of a GPUNode's status, as Object writes it.
type status struct {
	Source        string `json:"source"`
	DriverVersion string `json:"driverVersion"`
	CUDAVersion   string `json:"cudaVersion"`
	SlotsPerGPU   int    `json:"slotsPerGPU"`
	// MemoryOversubscription: the agent runs with --oversubscribe.
	MemoryOversubscription bool        `json:"memoryOversubscription"`
	GPUs                   []gpuStatus `json:"gpus"`
}

type gpuStatus struct {
	UUID              string        `json:"uuid"`
	Index             int           `json:"index"`
	Model             string        `json:"model"`
	Product           string        `json:"product"`
	Vendor            string        `json:"vendor"`
	MemoryMiB         int64         `json:"memoryMiB"`
	SMCount           int           `json:"smCount"`
	ComputeCapability string        `json:"computeCapability"`
	NUMANode          int           `json:"numaNode"`
	PCIBusID          string        `json:"pciBusId"`
	MIGMode           string        `json:"migMode"`
	MIGInstances      []migInstance `json:"migInstances"`
	MIGManaged        bool          `json:"migManaged"`
	Health            string        `json:"health"`
	HealthReason      string        `json:"healthReason"`
	Sharing           string        `json:"sharing"`
	NVLinkPeers       []peer        `json:"nvlinkPeers"`
}

type migInstance struct {
	UUID      string `json:"uuid"`
	Profile   string `json:"profile"`
	MemoryMiB int64  `json:"memoryMiB"`
	SMCount   int    `json:"smCount"`
	Start     *int   `json:"start"`
	InUse     bool   `json:"inUse"`
}

type peer struct {
	Index int `json:"index"`
	Links int `json:"links"`
}

// FromObject reads a GPUNode object back into the inventory it describes:
// the node's GPUs (with health and MIG instances), their NVLink links and
// whether the agent oversubscribes memory.
// The node's CPU and memory are not part of a GPUNode and stay zero. The
// result is validated, and so is each GPU's sharing mode (one of
// SharingModes; empty is read as unset); a malformed object is an error
// naming the field. Sharing gives the modes.
func FromObject(u *unstructured.Unstructured) (inventory.Node, error) {
	st, err := decodeStatus(u)
	if err != nil {
		return inventory.Node{}, err
	}
	n := inventory.Node{Name: u.GetName(), Source: st.Source, DriverVersion: st.DriverVersion, CUDAVersion: st.CUDAVersion, GPUs: []inventory.GPU{},
		MemoryOversubscription: st.MemoryOversubscription}
	seen := map[[2]int]bool{}
	for _, g := range st.GPUs {
		ig := inventory.GPU{
			UUID: g.UUID, Index: g.Index, Model: g.Model, Product: g.Product, Vendor: g.Vendor,
			MemoryMiB: g.MemoryMiB, SMCount: g.SMCount, ComputeCapability: g.ComputeCapability,
			NUMANode: g.NUMANode, PCIBusID: g.PCIBusID, MIGMode: inventory.MIGMode(g.MIGMode), MIGManaged: g.MIGManaged,
			Health: inventory.Health(g.Health), HealthReason: g.HealthReason, Sharing: g.Sharing,
		}
		for _, m := range g.MIGInstances {
			ig.MIGInstances = append(ig.MIGInstances, inventory.MIGInstance{UUID: m.UUID, Profile: m.Profile, MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, Start: m.Start, InUse: m.InUse})
		}
		n.GPUs = append(n.GPUs, ig)
		for _, p := range g.NVLinkPeers {
			key := [2]int{min(g.Index, p.Index), max(g.Index, p.Index)}
			if !seen[key] {
				seen[key] = true
				n.Links = append(n.Links, inventory.Link{A: key[0], B: key[1], NVLinks: p.Links})
			}
		}
	}
	if err := n.Validate(); err != nil {
		return inventory.Node{}, fmt.Errorf("GPUNode %s: %w", u.GetName(), err)
	}
	return n, nil
}

// decodeStatus decodes a GPUNode's status and checks every GPU's sharing.
func decodeStatus(u *unstructured.Unstructured) (status, error) {
	raw, ok := u.Object["status"]
	if !ok {
		return status{}, fmt.Errorf("GPUNode %s: status is missing", u.GetName())
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return status{}, fmt.Errorf("GPUNode %s: status: %w", u.GetName(), err)
	}
	var st status
	if err := json.Unmarshal(data, &st); err != nil {
		return status{}, fmt.Errorf("GPUNode %s: status: %w", u.GetName(), err)
	}
	for i, g := range st.GPUs {
		if g.Sharing != "" && !ValidSharing(g.Sharing) {
			return status{}, fmt.Errorf("GPUNode %s: status.gpus[%d].sharing: must be one of %s, got %q",
				u.GetName(), i, strings.Join(SharingModes(), ", "), g.Sharing)
		}
	}
	return st, nil
}

// Sharing returns the sharing mode of each GPU of a GPUNode object, by
// UUID ("" where the object sets none). A mode outside SharingModes is an
// error naming the field.
func Sharing(u *unstructured.Unstructured) (map[string]string, error) {
	st, err := decodeStatus(u)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(st.GPUs))
	for _, g := range st.GPUs {
		out[g.UUID] = g.Sharing
	}
	return out, nil
}
