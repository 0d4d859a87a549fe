package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/dra"
)

// SlicePublisher publishes a node's GPUs as DRA ResourceSlices of
// Tessera's driver (kube/dra's device model, owned by the Node) through
// the resourceslice helper of k8s.io/dynamic-resource-allocation, which
// creates, updates and deletes the slices to match. The first Publish
// starts the helper, which runs until ctx ends or Stop; each later one
// hands it the node's devices as they are now.
type SlicePublisher struct {
	Client kubernetes.Interface
	// Sharing is the agent's sharing mode of its GPUs not in MIG mode
	// (the devices' sharing attribute and whether they take shares).
	Sharing string
	// Catalog, when set, adds the MIG devices of GPUs in MIG mode
	// (dra.ResourcesWithMIG: a managed GPU's profiles and start slots with
	// its counters, a static GPU's instances); nil publishes GPUs not in
	// MIG mode only.
	Catalog *catalog.Catalog
	Log     *slog.Logger

	ctrl *resourceslice.Controller
}

// Publish implements agent.Publisher.
func (p *SlicePublisher) Publish(ctx context.Context, node inventory.Node) error {
	node.GPUs = slices.Clone(node.GPUs)
	for i := range node.GPUs {
		if node.GPUs[i].MIGMode != inventory.MIGEnabled {
			node.GPUs[i].Sharing = p.Sharing
		}
	}
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	res := dra.Resources(&node)
	if p.Catalog != nil {
		withMIG, err := dra.ResourcesWithMIG(&node, p.Catalog)
		if err != nil {
			log.Warn("MIG devices left out of the ResourceSlices", "node", node.Name, "error", err)
		} else {
			res = withMIG
		}
	}
	if p.ctrl != nil {
		p.ctrl.Update(res)
		return nil
	}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: dra.DriverName, KubeClient: p.Client, Owner: dra.NodeOwner(node.Name), Resources: res,
		ErrorHandler: func(_ context.Context, err error, msg string) {
			log.Warn("cannot publish ResourceSlices; the helper retries", "node", node.Name, "what", msg, "error", err)
		},
	})
	if err != nil {
		return fmt.Errorf("start publishing ResourceSlices of %s: %w", node.Name, err)
	}
	p.ctrl = ctrl
	log.Info("publishing GPUs as DRA devices", "node", node.Name, "driver", dra.DriverName)
	return nil
}

// Stop stops publishing (the slices stay until the node goes).
func (p *SlicePublisher) Stop() {
	if p.ctrl != nil {
		p.ctrl.Stop()
	}
}

// Publishers publishes through each in turn; an error of one does not
// keep the others from publishing.
type Publishers []interface {
	Publish(ctx context.Context, node inventory.Node) error
}

// Publish implements agent.Publisher.
func (ps Publishers) Publish(ctx context.Context, node inventory.Node) error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Publish(ctx, node))
	}
	return errors.Join(errs...)
}
