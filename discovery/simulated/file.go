package simulated

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/quantity"
)

// MaxReplicas bounds a node entry's replicas.
const MaxReplicas = 100000

// File is the YAML form of a simulated cluster:
//
//	nodes:
//	- name: hgx            # replicas > 1 name nodes hgx-0, hgx-1, ...
//	  replicas: 2
//	  gpus: 8xH200
//	  cpu: "192"           # cores (a share, e.g. "96" or "95.5")
//	  memory: 2Ti
//	  topology: nvswitch   # auto (default), nvswitch, pairs, pcie, none
//	  links: [{a: 0, b: 1, nvlinks: 4, pcie: PIX}]   # replace the preset's links
//	  overrides:
//	  - index: 3
//	    health: Unhealthy
//	    healthReason: "XID 79: GPU has fallen off the bus"
//	    memoryUsed: 10Gi
//	    allocated: "0.5"
//	    numaNode: 1
//	    migInstances: [1g.18gb, 1g.18gb]
type File struct {
	Nodes []NodeSpec `json:"nodes"`
}

// NodeSpec is one node entry of a File.
type NodeSpec struct {
	Name      string           `json:"name"`
	Replicas  int              `json:"replicas,omitempty"`
	GPUs      string           `json:"gpus"`
	CPU       string           `json:"cpu,omitempty"`
	Memory    string           `json:"memory,omitempty"`
	Topology  string           `json:"topology,omitempty"`
	Links     []inventory.Link `json:"links,omitempty"`
	Overrides []GPUOverride    `json:"overrides,omitempty"`
}

// GPUOverride changes one simulated GPU of a node.
type GPUOverride struct {
	Index        int    `json:"index"`
	Health       string `json:"health,omitempty"`
	HealthReason string `json:"healthReason,omitempty"`
	MemoryUsed   string `json:"memoryUsed,omitempty"`
	Allocated    string `json:"allocated,omitempty"`
	NUMANode     *int   `json:"numaNode,omitempty"`
	// MIGInstances puts the GPU in MIG mode with these instances, each a
	// profile name, optionally with its start slot ("3g.40gb@4"); an
	// instance without a start takes the lowest free valid one, in order.
	MIGInstances []string `json:"migInstances,omitempty"`
	// MIGManaged puts the GPU in MIG mode with its layout managed by
	// Tessera (dynamic MIG), with or without instances.
	MIGManaged bool `json:"migManaged,omitempty"`
}

// FromFile reads a YAML File and builds its nodes.
func FromFile(path string, cat *catalog.Catalog) (*Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read simulated cluster: %w", err)
	}
	nodes, err := Parse(data, cat)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Source{name: "sim:" + path, nodes: nodes}, nil
}

// Parse builds nodes from the YAML form of a File. Unknown fields are errors.
func Parse(data []byte, cat *catalog.Catalog) ([]inventory.Node, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("parse simulated cluster: %w", err)
	}
	if len(f.Nodes) == 0 {
		return nil, fmt.Errorf("nodes: must list at least one node")
	}
	var out []inventory.Node
	seen := map[string]bool{}
	for i, ns := range f.Nodes {
		built, err := ns.build(cat)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d]: %w", i, err)
		}
		for _, n := range built {
			if seen[n.Name] {
				return nil, fmt.Errorf("nodes[%d]: node name %q is used twice", i, n.Name)
			}
			seen[n.Name] = true
		}
		out = append(out, built...)
	}
	return out, nil
}

func (ns NodeSpec) build(cat *catalog.Catalog) ([]inventory.Node, error) {
	if ns.Name == "" {
		return nil, fmt.Errorf("name: must not be empty")
	}
	replicas := ns.Replicas
	if replicas == 0 {
		replicas = 1
	}
	if replicas < 1 || replicas > MaxReplicas {
		return nil, fmt.Errorf("replicas: must be in [1, %d], got %d", MaxReplicas, ns.Replicas)
	}
	var cpu, mem int64
	var err error
	if ns.CPU != "" {
		if cpu, err = quantity.ParseShare(ns.CPU); err != nil {
			return nil, fmt.Errorf("cpu: must be a number of cores such as 64 or 95.5: %w", err)
		}
	}
	if ns.Memory != "" {
		if mem, err = quantity.ParseMiB(ns.Memory); err != nil {
			return nil, fmt.Errorf("memory: must be a size such as 512Gi: %w", err)
		}
	}
	var out []inventory.Node
	for r := 0; r < replicas; r++ {
		name := ns.Name
		if replicas > 1 {
			name = fmt.Sprintf("%s-%d", ns.Name, r)
		}
		n, err := buildNode(name, ns.GPUs, ns.Topology, cat)
		if err != nil {
			return nil, fmt.Errorf("gpus: %w", err)
		}
		n.CPUMilli, n.MemoryMiB = cpu, mem
		if ns.Links != nil {
			n.Links = slices.Clone(ns.Links)
		}
		for k, o := range ns.Overrides {
			if err := o.apply(&n, cat); err != nil {
				return nil, fmt.Errorf("overrides[%d]: %w", k, err)
			}
		}
		if err := n.Validate(); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (o GPUOverride) apply(n *inventory.Node, cat *catalog.Catalog) error {
	g, ok := n.GPUByIndex(o.Index)
	if !ok {
		return fmt.Errorf("index: must be in [0, %d], got %d", len(n.GPUs)-1, o.Index)
	}
	switch inventory.Health(o.Health) {
	case "":
	case inventory.Healthy, inventory.Unhealthy, inventory.Unknown:
		g.Health = inventory.Health(o.Health)
	default:
		return fmt.Errorf("health: must be Healthy, Unhealthy or Unknown, got %q", o.Health)
	}
	g.HealthReason = o.HealthReason
	if o.MemoryUsed != "" {
		used, err := quantity.ParseMiB(o.MemoryUsed)
		if err != nil || used > g.MemoryMiB {
			return fmt.Errorf("memoryUsed: must be a size in [0, %s], got %q", quantity.FormatMiB(g.MemoryMiB), o.MemoryUsed)
		}
		g.MemoryUsedMiB = used
	}
	if o.Allocated != "" {
		a, err := quantity.ParseShare(o.Allocated)
		if err != nil || a > quantity.MilliPerUnit {
			return fmt.Errorf("allocated: must be a share in [0, 1], got %q", o.Allocated)
		}
		g.AllocatedMilli = a
	}
	if o.NUMANode != nil {
		if *o.NUMANode < 0 {
			return fmt.Errorf("numaNode: must be >= 0, got %d", *o.NUMANode)
		}
		g.NUMANode = *o.NUMANode
	}
	if len(o.MIGInstances) > 0 || o.MIGManaged {
		return o.applyMIG(g, cat)
	}
	return nil
}

func (o GPUOverride) applyMIG(g *inventory.GPU, cat *catalog.Catalog) error {
	m, ok := cat.Lookup(g.Model)
	if !ok || !m.SupportsMIG() {
		return fmt.Errorf("migInstances: GPU %d (%s) does not support MIG", g.Index, g.Model)
	}
	spec := m.MIG
	var used uint32
	media := false
	var layout []catalog.MIGPlacement
	for _, entry := range o.MIGInstances {
		name, startText, explicit := strings.Cut(strings.TrimSpace(entry), "@")
		q := spec.ProfileIndex(name)
		if q < 0 {
			return fmt.Errorf("migInstances: %q is not a %s profile; use one of %v", name, m.Name, spec.ProfileNames())
		}
		p := spec.Profiles[q]
		start := -1
		if explicit {
			n, err := strconv.Atoi(startText)
			if err != nil {
				return fmt.Errorf("migInstances: %q: the start after @ must be a memory slice number, got %q", entry, startText)
			}
			if why := spec.CanPlace(used, media, q, n); why != "" {
				return fmt.Errorf("migInstances: %q: %s (layout so far %v)", entry, why, layout)
			}
			start = n
		} else {
			if st := spec.FreeStarts(used, media, q); len(st) > 0 {
				start = st[0]
			}
			if start < 0 {
				return fmt.Errorf("migInstances: %q: no free start for %s beside %v (valid starts %v)", entry, p.Name, layout, p.Starts)
			}
		}
		used |= spec.SlotMask(q, start)
		media = media || p.MediaExtended()
		layout = append(layout, catalog.MIGPlacement{Profile: p.Name, Start: start})
		g.MIGInstances = append(g.MIGInstances, inventory.MIGInstance{
			UUID:    fmt.Sprintf("MIG-%s/%d", g.UUID, len(g.MIGInstances)),
			Profile: p.Name, MemoryMiB: p.MemoryMiB, SMCount: p.SMCount, Start: inventory.Slot(start),
		})
	}
	if err := spec.CheckLayout(layout); err != nil {
		return fmt.Errorf("migInstances: %w", err)
	}
	g.MIGMode = inventory.MIGEnabled
	g.MIGManaged = o.MIGManaged
	return nil
}
