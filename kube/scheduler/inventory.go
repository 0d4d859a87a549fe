package scheduler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// LabelModel is the node label naming the catalog model of a node's GPUs.
const LabelModel = "tessera.io/gpu-model"

// InventorySource reports the GPUs of a Kubernetes node. A node without
// Tessera GPUs returns an inventory.Node with no GPUs and no error.
type InventorySource interface {
	Node(n *corev1.Node) (inventory.Node, error)
}

// LabelInventory reads a node's GPUs from its allocatable tessera.io/gpu
// count and its tessera.io/gpu-model label, with the catalog's figures for
// memory. GPU UUIDs are "<node>/gpu<i>". It serves nodes whose agent does not
// publish a detailed inventory (and the tests' KWOK nodes).
type LabelInventory struct {
	Catalog *catalog.Catalog
}

// Node implements InventorySource.
func (l LabelInventory) Node(n *corev1.Node) (inventory.Node, error) {
	out := inventory.Node{Name: n.Name, Source: "node-labels"}
	if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		out.CPUMilli = q.MilliValue()
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		out.MemoryMiB = q.Value() >> 20
	}
	q, ok := n.Status.Allocatable[workload.ResourceGPU]
	if !ok {
		return out, nil
	}
	count, isInt := q.AsInt64()
	if !isInt || count < 0 || count > 64 {
		return out, fmt.Errorf("node %s: allocatable %s must be a whole number in [0, 64], got %s", n.Name, workload.ResourceGPU, q.String())
	}
	name := n.Labels[LabelModel]
	if name == "" {
		return out, fmt.Errorf("node %s: label %s must name the GPU model (see tessera show-gpus -a)", n.Name, LabelModel)
	}
	m, err := l.Catalog.Resolve(name)
	if err != nil {
		return out, fmt.Errorf("node %s: label %s: %w", n.Name, LabelModel, err)
	}
	for i := 0; i < int(count); i++ {
		out.GPUs = append(out.GPUs, inventory.GPU{
			UUID: fmt.Sprintf("%s/gpu%d", n.Name, i), Index: i, Model: m.Name, Product: m.Name,
			Vendor: string(m.Vendor), MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, NUMANode: -1,
			Health: inventory.Healthy, MIGMode: inventory.MIGDisabled,
		})
	}
	return out, nil
}
