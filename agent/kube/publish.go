package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// Publisher writes a node's inventory to the API server: the GPUNode object
// (owned by the Node, so it goes when the Node goes) and the
// tessera.io/gpu-memory extended resource in the Node's status.
type Publisher struct {
	Core        kubernetes.Interface
	Dynamic     dynamic.Interface
	SlotsPerGPU int
	Sharing     string
	// Oversubscribe is published as the GPUNode's
	// status.memoryOversubscription: the agent converts containers' device
	// allocations to managed memory (--oversubscribe), and the scheduler
	// places the pods that ask for that only here.
	Oversubscribe bool
	// InstallCRD makes the first Publish install the GPUNode CRD.
	InstallCRD bool
	Log        *slog.Logger

	crdDone bool
}

// Publish writes node's inventory. It is safe to call again at any time
// (after a restart, a health change or a change of the MIG layout): it
// creates or updates.
func (p *Publisher) Publish(ctx context.Context, node inventory.Node) error {
	if p.InstallCRD && !p.crdDone {
		if err := gpunode.InstallCRD(ctx, p.Dynamic); err != nil {
			return err
		}
		p.crdDone = true
	}
	k8sNode, err := p.Core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", node.Name, err)
	}
	node.MemoryOversubscription = p.Oversubscribe
	obj := gpunode.Object(node, p.SlotsPerGPU, p.Sharing)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k8sNode.Name, UID: k8sNode.UID}})
	client := p.Dynamic.Resource(gpunode.Resource())
	cur, err := client.Get(ctx, node.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create GPUNode %s: %w", node.Name, err)
		}
	case err != nil:
		return fmt.Errorf("get GPUNode %s: %w", node.Name, err)
	default:
		obj.SetResourceVersion(cur.GetResourceVersion())
		if _, err := client.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update GPUNode %s: %w", node.Name, err)
		}
	}
	if err := p.patchNode(ctx, node); err != nil {
		return err
	}
	if p.Log != nil {
		p.Log.Info("published GPU inventory", "node", node.Name, "gpus", len(node.GPUs))
	}
	return nil
}

// patchNode sets the node's GPU memory extended resource (healthy GPUs only).
func (p *Publisher) patchNode(ctx context.Context, node inventory.Node) error {
	var bytes int64
	for _, g := range node.GPUs {
		if g.Health != inventory.Unhealthy {
			bytes += g.MemoryMiB << 20
		}
	}
	q := resource.NewQuantity(bytes, resource.BinarySI).String()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"capacity":    map[string]string{ResourceGPUMemory: q},
		"allocatable": map[string]string{ResourceGPUMemory: q},
	}})
	if err != nil {
		return fmt.Errorf("encode node patch: %w", err)
	}
	if _, err := p.Core.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch node %s status (%s): %w", node.Name, ResourceGPUMemory, err)
	}
	return nil
}
