package clusterinv

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// StaleUse is how old a node's GPUUse may be before its figures are shown
// as not metered: four of the longest publication periods, so an agent
// that stopped publishing (or a node that went away) is told apart from
// one whose use does not move.
const StaleUse = 4 * gpuuse.MaxPublishPeriod

// ErrNoGPUUse says the cluster does not serve GPUUse objects.
var ErrNoGPUUse = fmt.Errorf("the cluster does not serve GPUUse objects (gpuuses.tessera.io)")

// readUse returns each GPU of inv's nodes' use by UUID, from the nodes'
// GPUUse objects as their agents last published them, at now. A GPU whose
// node publishes none, or whose publication is older than StaleUse, is not
// metered and says why. It fails (wrapping ErrNoGPUUse when the resource is
// not served) only when the objects cannot be listed at all.
func (r Reader) readUse(ctx context.Context, inv *Inventory, now time.Time) (map[string]gpuuse.Use, error) {
	list, err := r.Dynamic.Resource(nodeuse.Resource()).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w at %s: install Tessera's CRDs (deploy/crds/) and run agents that publish use (tessera agent --use-period)", ErrNoGPUUse, r.Server)
	}
	if err != nil {
		return nil, explain(err, r.Server, "list", "gpuuses.tessera.io")
	}
	byNode := map[string]nodeuse.Status{}
	for i := range list.Items {
		st, err := nodeuse.FromObject(&list.Items[i])
		if err != nil {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("%v; its GPUs are shown not metered", err))
			continue
		}
		byNode[list.Items[i].GetName()] = st
	}
	use := map[string]gpuuse.Use{}
	for _, n := range inv.Nodes {
		st, ok := byNode[n.Name]
		recs := map[string]gpuuse.Use{}
		for _, g := range st.GPUs {
			recs[g.GPU] = g.Use
		}
		for _, g := range n.GPUs {
			u, listed := recs[g.UUID]
			switch age := now.Sub(st.At); {
			case !ok:
				u = gpuuse.NotMetered("the node's agent publishes no use (no GPUUse " + n.Name + ")")
			case age > StaleUse:
				u = gpuuse.NotMetered(fmt.Sprintf("the node's agent last published use %v ago", age.Round(time.Second)))
			case !listed:
				u = gpuuse.NotMetered("the node's GPUUse does not list this GPU")
			}
			use[g.UUID] = u
		}
	}
	return use, nil
}

// IdleSince reads, from the nodes' GPUUse objects current at now (not
// older than StaleUse), the pods that are idle holders (every
// share a pod has is marked idle), each with the latest of its shares'
// marks. An object that does not read is left out with its error.
func IdleSince(objs []*unstructured.Unstructured, now time.Time) (map[string]time.Time, []error) {
	out := map[string]time.Time{}
	var errs []error
	busy := map[string]bool{}
	for _, u := range objs {
		st, err := nodeuse.FromObject(u)
		if err != nil {
			errs = append(errs, err) // it names the object and the field
			continue
		}
		if now.Sub(st.At) > StaleUse {
			continue // an agent that stopped publishing: its marks may be long out of date
		}
		for _, g := range st.GPUs {
			for _, sh := range g.Shares {
				if sh.Idle == nil {
					busy[sh.Workload] = true
					continue
				}
				if sh.Idle.Since.After(out[sh.Workload]) {
					out[sh.Workload] = sh.Idle.Since
				}
			}
		}
	}
	for pod := range busy {
		delete(out, pod)
	}
	return out, errs
}
