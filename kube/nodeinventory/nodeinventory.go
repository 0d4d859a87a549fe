package nodeinventory

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// Node labels read when a node has no GPUNode object.
const (
	// LabelModel names the catalog model of a node's GPUs.
	LabelModel = "tessera.io/gpu-model"
	// LabelCount is the number of GPUs. (The allocatable tessera.io/gpu
	// counts the agent's device-plugin slots, not GPUs.)
	LabelCount = "tessera.io/gpu-count"
)

// Source reports the GPUs of a Kubernetes node. A node without
// Tessera GPUs returns an inventory.Node with no GPUs and no error.
type Source interface {
	Node(n *corev1.Node) (inventory.Node, error)
}

// Version identifies what a Source's answer for a node was read from:
// while it is the same, so is the answer. The zero value means unknown.
type Version struct {
	uid           types.UID
	node, gpuNode string // resourceVersions ("" for no GPUNode)
}

// Versioned is a Source that tells, cheaply, the version of its answer
// for a node (ok false when it cannot), so that a snapshot kept across
// cycles reads again only the nodes whose version changed.
type Versioned interface {
	Version(n *corev1.Node) (Version, bool)
}

// VersionOf is the version of src's answer for n; zero when unknown.
func VersionOf(src Source, n *corev1.Node) Version {
	if vs, ok := src.(Versioned); ok {
		if v, ok := vs.Version(n); ok {
			return v
		}
	}
	return Version{}
}

// nodeVersion is the version of an answer read from the Node object alone.
func nodeVersion(n *corev1.Node) (Version, bool) {
	return Version{uid: n.UID, node: n.ResourceVersion}, n.ResourceVersion != ""
}

// Labels reads a node's GPUs from its tessera.io/gpu-count and
// tessera.io/gpu-model labels, with the catalog's figures for memory. GPU
// UUIDs are "<node>/gpu<i>". It serves nodes without a GPUNode object (no
// Tessera agent yet), e.g. the tests' KWOK nodes.
type Labels struct {
	Catalog *catalog.Catalog
}

// Node implements Source.
func (l Labels) Node(n *corev1.Node) (inventory.Node, error) {
	out := inventory.Node{Name: n.Name, Source: "node-labels"}
	hostResources(n, &out)
	v, ok := n.Labels[LabelCount]
	if !ok {
		return out, nil
	}
	count, err := strconv.Atoi(v)
	if err != nil || count < 0 || count > 64 {
		return out, fmt.Errorf("node %s: label %s must be a whole number in [0, 64], got %q", n.Name, LabelCount, v)
	}
	name := n.Labels[LabelModel]
	if name == "" {
		return out, fmt.Errorf("node %s: label %s must name the GPU model (see tessera show-gpus -a)", n.Name, LabelModel)
	}
	m, err := l.Catalog.Resolve(name)
	if err != nil {
		return out, fmt.Errorf("node %s: label %s: %w", n.Name, LabelModel, err)
	}
	for i := 0; i < count; i++ {
		out.GPUs = append(out.GPUs, inventory.GPU{
			UUID: fmt.Sprintf("%s/gpu%d", n.Name, i), Index: i, Model: m.Name, Product: m.Name,
			Vendor: string(m.Vendor), MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, NUMANode: -1,
			Health: inventory.Healthy, MIGMode: inventory.MIGDisabled,
		})
	}
	return out, nil
}

// Version implements Versioned: the answer is read from the Node alone.
func (Labels) Version(n *corev1.Node) (Version, bool) { return nodeVersion(n) }

// hostResources fills a node's CPU, memory and pod count from its
// allocatable.
func hostResources(n *corev1.Node, out *inventory.Node) {
	if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		out.CPUMilli = q.MilliValue()
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		out.MemoryMiB = q.Value() >> 20
	}
	if q, ok := n.Status.Allocatable[corev1.ResourcePods]; ok {
		out.Pods = max(q.Value(), 0)
	}
}

// GPUNodes reads a node's GPUs from its GPUNode object (published by
// the Tessera agent: real UUIDs, health, MIG and NVLink) and falls back to
// Fallback for nodes that have none.
type GPUNodes struct {
	// Get returns the GPUNode object of a node, found false when absent.
	Get      func(name string) (obj *unstructured.Unstructured, found bool, err error)
	Fallback Source
}

// Node implements Source.
func (g GPUNodes) Node(n *corev1.Node) (inventory.Node, error) {
	obj, found, err := g.Get(n.Name)
	if err != nil {
		return inventory.Node{}, fmt.Errorf("node %s: read GPUNode: %w", n.Name, err)
	}
	if !found {
		return g.Fallback.Node(n)
	}
	out, err := gpunode.FromObject(obj)
	if err != nil {
		return inventory.Node{}, err
	}
	hostResources(n, &out)
	return out, nil
}

// Version implements Versioned: the Node's and its GPUNode's versions.
func (g GPUNodes) Version(n *corev1.Node) (Version, bool) {
	obj, found, err := g.Get(n.Name)
	if err != nil {
		return Version{}, false
	}
	if !found {
		if f, ok := g.Fallback.(Versioned); ok {
			return f.Version(n)
		}
		return Version{}, false
	}
	v, ok := nodeVersion(n)
	v.gpuNode = obj.GetResourceVersion()
	return v, ok && v.gpuNode != ""
}
