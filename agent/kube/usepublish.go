package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// UsePublisher writes a node's use records as its GPUUse object (owned by
// the Node, so it goes when the Node goes). A publication is one merge
// patch of the status: one write, with no read before it; only the first
// (the object missing) reads the Node and creates the object.
type UsePublisher struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	Node    string
	// InstallCRD makes the first Publish install the GPUUse CRD.
	InstallCRD bool

	crdDone bool
}

// Publish implements usepub.Sink.
func (p *UsePublisher) Publish(ctx context.Context, st nodeuse.Status) error {
	if p.InstallCRD && !p.crdDone {
		if err := nodeuse.InstallCRD(ctx, p.Dynamic); err != nil {
			return err
		}
		p.crdDone = true
	}
	content, err := nodeuse.StatusContent(st)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"status": content})
	if err != nil {
		return fmt.Errorf("encode GPUUse %s patch: %w", p.Node, err)
	}
	client := p.Dynamic.Resource(nodeuse.Resource())
	_, err = client.Patch(ctx, p.Node, types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("patch GPUUse %s status: %w", p.Node, err)
		}
		return nil
	}
	k8sNode, err := p.Core.CoreV1().Nodes().Get(ctx, p.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s (the owner of its GPUUse): %w", p.Node, err)
	}
	obj, err := nodeuse.Object(p.Node, st)
	if err != nil {
		return err
	}
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k8sNode.Name, UID: k8sNode.UID}})
	if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create GPUUse %s: %w", p.Node, err)
	}
	return nil
}
