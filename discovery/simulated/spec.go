package simulated

import (
	"context"
	"crypto/sha1"
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// MaxGPUsPerNode bounds a spec term's count; no real host carries more.
const MaxGPUsPerNode = 64

// Source is a fixed simulated inventory. It is safe for concurrent use.
type Source struct {
	name  string
	nodes []inventory.Node
}

// Name implements discovery.Source.
func (s *Source) Name() string { return s.name }

// Discover implements discovery.Source. It returns a deep copy, so callers may
// change what they get.
func (s *Source) Discover(ctx context.Context) ([]inventory.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulated discovery: %w", err)
	}
	out := make([]inventory.Node, len(s.nodes))
	for i, n := range s.nodes {
		n.GPUs = append([]inventory.GPU(nil), n.GPUs...)
		for j := range n.GPUs {
			n.GPUs[j].MIGInstances = append([]inventory.MIGInstance(nil), n.GPUs[j].MIGInstances...)
		}
		n.Links = append([]inventory.Link(nil), n.Links...)
		out[i] = n
	}
	return out, nil
}

// FromSpec builds one node named "sim-0" from a spec such as "8xH200" or
// "4xA100-80GB+2xL4". A term without a count means one GPU.
func FromSpec(spec string, cat *catalog.Catalog) (*Source, error) {
	n, err := buildNode("sim-0", spec, "", cat)
	if err != nil {
		return nil, err
	}
	return &Source{name: "sim:" + spec, nodes: []inventory.Node{n}}, nil
}

// term is one "COUNTxMODEL" part of a spec.
type term struct {
	count int
	model catalog.Model
}

// parseSpec parses a GPU spec into its terms, resolving each model.
func parseSpec(spec string, cat *catalog.Catalog) ([]term, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("GPU spec is empty: write COUNTxMODEL terms joined by +, e.g. 8xH200 or 4xA100-80GB+2xL4")
	}
	var terms []term
	total := 0
	for _, part := range strings.Split(spec, "+") {
		part = strings.TrimSpace(part)
		t, err := parseTerm(part, cat)
		if err != nil {
			return nil, fmt.Errorf("GPU spec %q: %w", spec, err)
		}
		total += t.count
		if total > MaxGPUsPerNode {
			return nil, fmt.Errorf("GPU spec %q: a node holds at most %d GPUs, the spec asks for %d or more", spec, MaxGPUsPerNode, total)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

func parseTerm(part string, cat *catalog.Catalog) (term, error) {
	if part == "" {
		return term{}, fmt.Errorf("empty term: write COUNTxMODEL, e.g. 8xH200")
	}
	i := 0
	for i < len(part) && part[i] >= '0' && part[i] <= '9' {
		i++
	}
	count := 1
	name := part
	if i > 0 {
		if i == len(part) || (part[i] != 'x' && part[i] != 'X' && part[i] != '*') {
			return term{}, fmt.Errorf("term %q: expected COUNTxMODEL, e.g. 8xH200", part)
		}
		n, err := strconv.Atoi(part[:i])
		if err != nil || n < 1 || n > MaxGPUsPerNode {
			return term{}, fmt.Errorf("term %q: count must be in [1, %d]", part, MaxGPUsPerNode)
		}
		count, name = n, part[i+1:]
	}
	if strings.TrimSpace(name) == "" {
		return term{}, fmt.Errorf("term %q: model name is missing", part)
	}
	m, err := cat.Resolve(name)
	if err != nil {
		return term{}, err
	}
	return term{count: count, model: m}, nil
}

// buildNode makes a node's GPUs from a spec and lays out its topology.
func buildNode(name, spec, topology string, cat *catalog.Catalog) (inventory.Node, error) {
	terms, err := parseSpec(spec, cat)
	if err != nil {
		return inventory.Node{}, err
	}
	n := inventory.Node{Name: name, Source: "sim", DriverVersion: "sim", CUDAVersion: "13.0"}
	for _, t := range terms {
		for k := 0; k < t.count; k++ {
			idx := len(n.GPUs)
			mig := inventory.MIGUnsupported
			if t.model.SupportsMIG() {
				mig = inventory.MIGDisabled
			}
			n.GPUs = append(n.GPUs, inventory.GPU{
				UUID:              simUUID(name, idx),
				Index:             idx,
				Model:             t.model.Name,
				Product:           productName(t.model),
				Vendor:            string(t.model.Vendor),
				MemoryMiB:         t.model.MemoryMiB,
				SMCount:           t.model.SMCount,
				ComputeCapability: t.model.ComputeCapability,
				MIGMode:           mig,
				PCIBusID:          fmt.Sprintf("00000000:%02X:00.0", 0x18+idx*0x10%0xe0),
				Health:            inventory.Healthy,
			})
		}
	}
	if err := layOut(&n, terms, topology); err != nil {
		return inventory.Node{}, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

func productName(m catalog.Model) string {
	return string(m.Vendor) + " " + m.Name
}

// simUUID returns a stable UUID-shaped id for a simulated GPU.
func simUUID(node string, idx int) string {
	h := sha1.Sum([]byte(fmt.Sprintf("tessera-sim/%s/%d", node, idx)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
