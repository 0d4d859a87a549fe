package placement

import (
	"fmt"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// GPU is one accelerator of a node as the engine sees it.
type GPU struct {
	// Index is the device index on its node.
	Index int
	// Model is an opaque model label ("H100-80GB", "V100M16"); requests
	// restrict placement by comparing labels.
	Model string
	// MemoryMiB is the GPU's memory; 0 means not tracked (memory is then
	// never a constraint on this GPU).
	MemoryMiB int64
	// FreeMilli is the unallocated compute share in [0, 1000].
	FreeMilli int64
	// FreeMemoryMiB is the unallocated memory in [0, MemoryMiB].
	FreeMemoryMiB int64
	// NUMANode is the host NUMA node, -1 when unknown.
	NUMANode int
	// MIG is set for a GPU in MIG mode: it takes MIG requests only, and its
	// FreeMilli and FreeMemoryMiB follow its instances in use (mig.go).
	// FromInventory sets it and Apply and Release change it; a snapshot
	// built by hand must not change it afterwards.
	MIG *MIGGPU
	// migSum summarises MIG for the chooser, kept by migFree.
	migSum migSummary
}

// Node is one host: its CPU, memory and pod slots, its GPUs and how they
// are linked.
type Node struct {
	Name string
	// CPUMilli and MemoryMiB are allocatable capacity; 0 means not tracked.
	CPUMilli      int64
	MemoryMiB     int64
	FreeCPUMilli  int64
	FreeMemoryMiB int64
	// Pods is how many pods the node runs at most (0: no limit) and
	// FreePods how many more it takes; each part with Pod.Slot takes one.
	Pods     int64
	FreePods int64
	GPUs     []GPU
	// NVLinks[i][j] is the number of NVLink lanes joining GPUs at positions
	// i and j of GPUs; nil when the topology is unknown.
	NVLinks [][]int
	// Shapes counts the GPU pods booked on the node by request shape (Apply
	// and Release keep it); the GpuClustering policy reads it.
	Shapes map[GPUShape]int
	// Closed, when set, says why the node takes no new work at all (in
	// the front door's words: "node is not Ready"); the work booked on it
	// stays. No pod is feasible there, with Closed as the reason. A front
	// door that changes it on a cluster being placed on calls Changed.
	Closed string
}

// GPUShape is the GPU part of a request: how many GPUs and how much of
// each; Milli is 0 for every fractional share (sharing pods form one class).
type GPUShape struct {
	Count int
	Milli int64
}

// Cluster is a snapshot of nodes. Policies only read it; Apply and Release
// change it, and record which node they changed (changelog.go), so that
// policies that score by node state follow the changes. Change nodes by
// hand only before placing on the cluster, or call Changed after.
type Cluster struct {
	Nodes []Node
	// log records the nodes Apply and Release changed; nil until the
	// first change. Clone leaves it out.
	log *changeLog
}

// Clone returns a deep copy of the snapshot. The copy's GPUs lie in one
// array in node order (each node's slice capped at its length), which
// keeps a scan over the nodes close in memory.
func (c *Cluster) Clone() *Cluster {
	out := &Cluster{Nodes: make([]Node, len(c.Nodes))}
	total := 0
	for i := range c.Nodes {
		total += len(c.Nodes[i].GPUs)
	}
	gpus := make([]GPU, 0, total)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		at := len(gpus)
		gpus = append(gpus, n.GPUs...)
		out.Nodes[i] = n.clone(gpus[at:len(gpus):len(gpus)])
		for k := range out.Nodes[i].GPUs {
			if g := &out.Nodes[i].GPUs[k]; g.MIG != nil {
				g.MIG = g.MIG.clone()
			}
		}
	}
	return out
}

// clone copies n, taking gpus (a copy of n.GPUs) as the copy's GPUs.
func (n *Node) clone(gpus []GPU) Node {
	o := *n
	o.GPUs = gpus
	if len(gpus) == 0 {
		o.GPUs = nil
	}
	if n.Shapes != nil {
		o.Shapes = make(map[GPUShape]int, len(n.Shapes))
		for k, v := range n.Shapes {
			o.Shapes[k] = v
		}
	}
	if n.NVLinks != nil {
		o.NVLinks = make([][]int, len(n.NVLinks))
		for i := range n.NVLinks {
			o.NVLinks[i] = append([]int(nil), n.NVLinks[i]...)
		}
	}
	return o
}

// FreeGPUMilli is the node's unallocated GPU compute, summed over its GPUs.
func (n *Node) FreeGPUMilli() int64 {
	var s int64
	for i := range n.GPUs {
		s += n.GPUs[i].FreeMilli
	}
	return s
}

// FullyFreeGPUs counts GPUs with nothing allocated.
func (n *Node) FullyFreeGPUs() int {
	k := 0
	for i := range n.GPUs {
		if n.GPUs[i].FreeMilli == request.Whole {
			k++
		}
	}
	return k
}

// TotalGPUMilli is the GPU compute capacity of the cluster.
func (c *Cluster) TotalGPUMilli() int64 {
	var s int64
	for i := range c.Nodes {
		s += int64(len(c.Nodes[i].GPUs)) * request.Whole
	}
	return s
}

// AllocatedGPUMilli is the GPU compute allocated in the cluster.
func (c *Cluster) AllocatedGPUMilli() int64 {
	var s int64
	for i := range c.Nodes {
		s += int64(len(c.Nodes[i].GPUs))*request.Whole - c.Nodes[i].FreeGPUMilli()
	}
	return s
}

// NewNode builds an empty node with count identical GPUs of one model.
// gpuMemMiB may be 0 (GPU memory not tracked).
func NewNode(name string, cpuMilli, memMiB int64, count int, model string, gpuMemMiB int64) Node {
	n := Node{Name: name, CPUMilli: cpuMilli, MemoryMiB: memMiB, FreeCPUMilli: cpuMilli, FreeMemoryMiB: memMiB}
	if count > 0 {
		n.GPUs = make([]GPU, 0, count)
	}
	for i := 0; i < count; i++ {
		n.GPUs = append(n.GPUs, GPU{Index: i, Model: model, MemoryMiB: gpuMemMiB, FreeMilli: request.Whole, FreeMemoryMiB: gpuMemMiB, NUMANode: -1})
	}
	return n
}

// FromInventory adapts discovered nodes into a snapshot. Allocations the
// inventory reports (AllocatedMilli, MemoryUsedMiB) are taken as already
// used; GPUs whose health is Unhealthy are left out. A GPU in MIG mode
// becomes a MIG GPU (GPU.MIG) whose geometry comes from the built-in
// catalog (FromInventoryCatalog takes another); its instances in use
// (MIGInstance.InUse), not AllocatedMilli, make its used share.
func FromInventory(nodes []inventory.Node) (*Cluster, error) {
	var cat *catalog.Catalog
	for i := range nodes {
		for _, g := range nodes[i].GPUs {
			if g.MIGMode == inventory.MIGEnabled && cat == nil {
				cat = catalog.Default()
			}
		}
	}
	return FromInventoryCatalog(nodes, cat)
}

// FromInventoryCatalog is FromInventory with the MIG geometry of GPUs in
// MIG mode taken from cat (nil: no geometry, existing instances only). A
// MIG layout that breaks the catalog's placement rules is an error.
func FromInventoryCatalog(nodes []inventory.Node, cat *catalog.Catalog) (*Cluster, error) {
	c := &Cluster{Nodes: make([]Node, 0, len(nodes))}
	for i := range nodes {
		in := &nodes[i]
		if err := in.Validate(); err != nil {
			return nil, err
		}
		n := Node{Name: in.Name, CPUMilli: in.CPUMilli, MemoryMiB: in.MemoryMiB, FreeCPUMilli: in.CPUMilli, FreeMemoryMiB: in.MemoryMiB,
			Pods: in.Pods, FreePods: in.Pods}
		var idx []int
		for _, g := range in.GPUs {
			if g.Health == inventory.Unhealthy {
				continue
			}
			n.GPUs = append(n.GPUs, GPU{
				Index: g.Index, Model: g.Model, MemoryMiB: g.MemoryMiB,
				FreeMilli: request.Whole - g.AllocatedMilli, FreeMemoryMiB: g.MemoryMiB - g.MemoryUsedMiB,
				NUMANode: g.NUMANode,
			})
			if g.MIGMode == inventory.MIGEnabled {
				pg := &n.GPUs[len(n.GPUs)-1]
				m, err := migFromInventory(&g, cat)
				if err != nil {
					return nil, fmt.Errorf("node %s: %w", in.Name, err)
				}
				pg.MIG = m
				migFree(pg)
			}
			idx = append(idx, g.Index)
		}
		if len(in.Links) > 0 {
			n.NVLinks = make([][]int, len(idx))
			for a := range idx {
				n.NVLinks[a] = make([]int, len(idx))
				for b := range idx {
					if a != b {
						n.NVLinks[a][b] = in.LinkBetween(idx[a], idx[b]).NVLinks
					}
				}
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}
