package gpusummary

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
)

// SchemaVersion identifies the JSON/YAML layout of a Report. It changes only
// when a field is removed or changes meaning; new fields may be added.
const SchemaVersion = "tessera.io/show-gpus/v1"

// Report is what show-gpus prints.
type Report struct {
	SchemaVersion string `json:"schemaVersion"`
	// Source names the inventory source, or is empty when only the catalog was read.
	Source string `json:"source"`
	// All is true when every catalog model was listed, not only the common ones.
	All  bool  `json:"all"`
	Rows []Row `json:"gpus"`
	// PoolLabel is the node label that names node pools; empty when the
	// inventory has no pools (a host, a simulation).
	PoolLabel string `json:"poolLabel,omitempty"`
	// Pools breaks the counted GPUs down by node pool and model; absent
	// when the inventory has no pools.
	Pools []PoolRow `json:"pools,omitempty"`
	// WithUse is true when the report carries use (Options.Use was given):
	// every counted row and pool then has Use.
	WithUse bool `json:"withUse,omitempty"`
}

// PoolRow counts one model's GPUs in one node pool.
type PoolRow struct {
	// Pool is the value of the pool label, or the model's name for nodes
	// without the label (then Labeled is false).
	Pool    string `json:"pool"`
	Labeled bool   `json:"labeled"`
	Model   string `json:"model"`
	// Nodes counts the nodes of the pool with GPUs of this model.
	Nodes     int `json:"nodes"`
	Total     int `json:"total"`
	Free      int `json:"free"`
	Unhealthy int `json:"unhealthy"`
	// FreeCapacity is the unallocated compute of healthy GPUs, in GPUs.
	FreeCapacity float64 `json:"freeCapacity"`
	// Use sums the use of the pool's GPUs; only in a report with use.
	Use *UseSum `json:"use,omitempty"`
}

// Row describes one model.
type Row struct {
	Model             string   `json:"model"`
	Vendor            string   `json:"vendor"`
	Family            string   `json:"family"`
	Architecture      string   `json:"architecture"`
	MemoryMiB         int64    `json:"memoryMiB"`
	SMCount           int      `json:"smCount"`
	ComputeCapability string   `json:"computeCapability"`
	Common            bool     `json:"common"`
	MIG               bool     `json:"mig"`
	MIGProfiles       []string `json:"migProfiles"`
	// InCatalog is false for devices the catalog does not know; their
	// figures come from the device itself.
	InCatalog bool `json:"inCatalog"`
	// Total, Free, Unhealthy and FreeCapacity are null when no inventory was read.
	Total     *int `json:"total"`
	Free      *int `json:"free"`
	Unhealthy *int `json:"unhealthy"`
	// FreeCapacity is the unallocated compute of healthy GPUs, in GPUs (6.5 = six and a half GPUs' worth).
	FreeCapacity *float64 `json:"freeCapacity"`
	// Use sums the use of the model's GPUs, and GPUs lists each one's;
	// only in a report with use.
	Use  *UseSum  `json:"use,omitempty"`
	GPUs []GPUUse `json:"devices,omitempty"`
}

// Options selects the rows.
type Options struct {
	// All lists every catalog model instead of the common ones.
	All bool
	// Filter keeps only models a name, alias or family denotes (case-insensitive).
	Filter string
	// Pools, when not nil, names the node pool of each node (node name to
	// the value of PoolLabel, "" where a node has none) and adds the pool
	// breakdown to the report; nodes without a pool are pooled by model.
	Pools map[string]string
	// PoolLabel is the label Pools was read from, for the report.
	PoolLabel string
	// Use, when not nil, is each GPU's use by UUID (a host daemon's
	// status, or the cluster's GPUUse objects) and adds use to the rows;
	// GPUs absent from it are not metered.
	Use map[string]gpuuse.Use
}

// Build makes a report. nodes is nil when no inventory was read (catalog
// only); source names it. Models present in the inventory are always listed.
// A filter that matches nothing is an error that lists close matches.
func Build(cat *catalog.Catalog, source string, nodes []inventory.Node, opt Options) (Report, error) {
	rep := Report{SchemaVersion: SchemaVersion, Source: source, All: opt.All, Rows: []Row{}, WithUse: opt.Use != nil}
	rows := map[string]*Row{}
	var order []string
	add := func(r Row) *Row {
		if old, ok := rows[r.Model]; ok {
			return old
		}
		rows[r.Model] = &r
		order = append(order, r.Model)
		return rows[r.Model]
	}
	var wanted map[string]bool
	if opt.Filter != "" {
		wanted = map[string]bool{}
		for _, m := range cat.Match(opt.Filter) {
			wanted[m.Name] = true
		}
	}
	for _, m := range cat.Models() {
		if (wanted == nil && (opt.All || m.Common)) || wanted[m.Name] {
			add(fromModel(m))
		}
	}
	pools := newPools(opt)
	for _, n := range nodes {
		for _, g := range n.GPUs {
			name, known := g.Model, g.Model != ""
			if !known {
				name = g.Product
			}
			if wanted != nil && !wanted[name] && !strings.EqualFold(name, opt.Filter) {
				continue
			}
			var r *Row
			if m, ok := cat.Lookup(name); ok && known {
				r = add(fromModel(m))
			} else {
				r = add(Row{Model: name, Vendor: g.Vendor, Family: name, MemoryMiB: g.MemoryMiB, SMCount: g.SMCount,
					ComputeCapability: g.ComputeCapability, MIG: g.MIGMode != inventory.MIGUnsupported, MIGProfiles: []string{}})
			}
			count(r, g)
			var u *gpuuse.Use
			if opt.Use != nil {
				v := useOf(opt, g.UUID)
				u = &v
				zeroUse(r)
				r.Use.add(v)
				r.GPUs = append(r.GPUs, GPUUse{Node: n.Name, Index: g.Index, UUID: g.UUID, Use: v})
			}
			pools.count(n.Name, r.Model, g, u)
		}
	}
	if opt.Filter != "" && len(order) == 0 {
		if _, err := cat.MatchOrError(opt.Filter); err != nil {
			return Report{}, fmt.Errorf("no GPU matches %q: %w", opt.Filter, err)
		}
	}
	if nodes != nil {
		for _, r := range rows {
			zero(r)
			if opt.Use != nil {
				zeroUse(r)
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := rows[order[i]], rows[order[j]]
		if a.Vendor != b.Vendor {
			return a.Vendor > b.Vendor // NVIDIA first, then Intel, AMD
		}
		return a.Model < b.Model
	})
	for _, name := range order {
		rep.Rows = append(rep.Rows, *rows[name])
	}
	if opt.Pools != nil {
		rep.PoolLabel = opt.PoolLabel
		rep.Pools = pools.sorted()
	}
	return rep, nil
}

func fromModel(m catalog.Model) Row {
	r := Row{Model: m.Name, Vendor: string(m.Vendor), Family: m.Family, Architecture: m.Architecture,
		MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, ComputeCapability: m.ComputeCapability,
		Common: m.Common, MIG: m.SupportsMIG(), InCatalog: true, MIGProfiles: []string{}}
	if m.MIG != nil {
		for _, p := range m.MIG.Profiles {
			r.MIGProfiles = append(r.MIGProfiles, p.Name)
		}
	}
	return r
}

// zero turns nil counters into zeros, for rows of an inventory report.
func zero(r *Row) {
	for _, p := range []**int{&r.Total, &r.Free, &r.Unhealthy} {
		if *p == nil {
			*p = new(int)
		}
	}
	if r.FreeCapacity == nil {
		r.FreeCapacity = new(float64)
	}
}

// zeroUse gives r an empty use sum, for rows of a report with use.
func zeroUse(r *Row) {
	if r.Use == nil {
		r.Use = &UseSum{}
	}
}

func count(r *Row, g inventory.GPU) {
	zero(r)
	*r.Total++
	if g.Health != inventory.Healthy {
		*r.Unhealthy++
		return
	}
	if g.AllocatedMilli == 0 {
		*r.Free++
	}
	*r.FreeCapacity += float64(1000-g.AllocatedMilli) / 1000
}

// poolCounter accumulates PoolRows.
type poolCounter struct {
	of    map[string]string // node -> pool label value; nil: no pools
	rows  map[poolKey]*PoolRow
	nodes map[poolKey]map[string]bool
}

type poolKey struct {
	pool, model string
	labeled     bool
}

func newPools(opt Options) *poolCounter {
	return &poolCounter{of: opt.Pools, rows: map[poolKey]*PoolRow{}, nodes: map[poolKey]map[string]bool{}}
}

func (p *poolCounter) count(node, model string, g inventory.GPU, u *gpuuse.Use) {
	if p.of == nil {
		return
	}
	k := poolKey{pool: p.of[node], model: model, labeled: p.of[node] != ""}
	if !k.labeled {
		k.pool = model
	}
	r := p.rows[k]
	if r == nil {
		r = &PoolRow{Pool: k.pool, Labeled: k.labeled, Model: model}
		p.rows[k] = r
		p.nodes[k] = map[string]bool{}
	}
	if u != nil {
		if r.Use == nil {
			r.Use = &UseSum{}
		}
		r.Use.add(*u)
	}
	if !p.nodes[k][node] {
		p.nodes[k][node] = true
		r.Nodes++
	}
	r.Total++
	if g.Health != inventory.Healthy {
		r.Unhealthy++
		return
	}
	if g.AllocatedMilli == 0 {
		r.Free++
	}
	r.FreeCapacity += float64(1000-g.AllocatedMilli) / 1000
}

// sorted returns the pools sorted: labelled pools by name, then the pools of
// unlabelled nodes; within a pool, by model.
func (p *poolCounter) sorted() []PoolRow {
	out := make([]PoolRow, 0, len(p.rows))
	for _, r := range p.rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Labeled != b.Labeled {
			return a.Labeled
		}
		if a.Pool != b.Pool {
			return a.Pool < b.Pool
		}
		return a.Model < b.Model
	})
	return out
}
