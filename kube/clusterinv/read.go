package clusterinv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// DefaultPoolLabel is the node label that names a node's pool unless
// another is chosen. Nodes without it are pooled by GPU model.
const DefaultPoolLabel = "tessera.io/pool"

// ErrNoGPUNodes is returned (wrapped) when the cluster does not serve the
// GPUNode resource: Tessera's CRDs are not installed.
var ErrNoGPUNodes = errors.New("the cluster does not serve GPUNode objects (gpunodes.tessera.io): Tessera's CRDs are not installed")

// Inventory is what Read found.
type Inventory struct {
	// Nodes are the nodes with a GPUNode object, sorted by name, their GPUs'
	// AllocatedMilli set to what the bound pods hold.
	Nodes []inventory.Node
	// Pools maps each of Nodes to its pool label's value ("" when unset).
	Pools map[string]string
	// Use is each GPU's use by UUID, from the nodes' GPUUse objects (a
	// GPU whose node publishes none, or a stale one, is not metered and
	// says why); nil when the cluster's GPUUse objects cannot be listed,
	// and UseError says why.
	Use      map[string]gpuuse.Use
	UseError error
	// Warnings list what was left out and why (a malformed GPUNode, one
	// without a Node, a pod with a malformed assignment).
	Warnings []string
}

// Reader reads a cluster's inventory with the given clients.
type Reader struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Server names the cluster in errors (the API server's address).
	Server string
	// PoolLabel is the node label naming pools; empty: DefaultPoolLabel.
	PoolLabel string
	// Now is the clock GPUUse ages are read on (time.Now when nil).
	Now func() time.Time
}

// Reader returns a Reader of the cluster.
func (c *Cluster) Reader(poolLabel string) (Reader, error) {
	client, dyn, err := c.Clients(0)
	if err != nil {
		return Reader{}, err
	}
	return Reader{Client: client, Dynamic: dyn, Server: c.Server, PoolLabel: poolLabel}, nil
}

// Read lists the Nodes, GPUNodes, pods and GPUUses and returns the
// inventory: one inventory.Node per GPUNode whose Node exists (as the
// scheduler sees them), less what the bound pods hold, and each GPU's use
// as its agent published it.
func (r Reader) Read(ctx context.Context) (Inventory, error) {
	label := r.PoolLabel
	if label == "" {
		label = DefaultPoolLabel
	}
	nodes, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Inventory{}, explain(err, r.Server, "list", "nodes")
	}
	objs, err := r.Dynamic.Resource(gpunode.Resource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Inventory{}, explain(err, r.Server, "list", "gpunodes.tessera.io")
	}
	// Only pods that hold a node: bound and not finished (the fake
	// clientset ignores field selectors; Holdings checks again).
	pods, err := r.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return Inventory{}, explain(err, r.Server, "list", "pods (all namespaces)")
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	podPtrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		podPtrs[i] = &pods.Items[i]
	}
	held, errs := boundpods.Holdings(podPtrs)
	inv := Inventory{Nodes: []inventory.Node{}, Pools: map[string]string{}}
	for _, err := range errs {
		inv.Warnings = append(inv.Warnings, fmt.Sprintf("%v; its GPUs are not counted as used", err))
	}
	for i := range objs.Items {
		obj := &objs.Items[i]
		node, ok := byName[obj.GetName()]
		if !ok {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("GPUNode %s: no Node of that name; not counted", obj.GetName()))
			continue
		}
		n, err := gpunode.FromObject(obj)
		if err != nil {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("%v; not counted", err))
			continue
		}
		inv.Warnings = append(inv.Warnings, book(&n, held[n.Name])...)
		inv.Nodes = append(inv.Nodes, n)
		inv.Pools[n.Name] = node.Labels[label]
	}
	sort.Slice(inv.Nodes, func(i, j int) bool { return inv.Nodes[i].Name < inv.Nodes[j].Name })
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	inv.Use, inv.UseError = r.readUse(ctx, &inv, now())
	return inv, nil
}

// book sets each GPU's AllocatedMilli to what the pods hold, saturating at
// a whole GPU as the scheduler's snapshot does; it returns warnings for
// holdings of GPUs the node does not report.
func book(n *inventory.Node, held map[string]boundpods.Held) []string {
	seen := map[string]bool{}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if h, ok := held[g.UUID]; ok {
			g.AllocatedMilli = min(h.ComputeMilli, 1000)
			seen[g.UUID] = true
		}
	}
	var warn []string
	for uuid, h := range held {
		if !seen[uuid] {
			warn = append(warn, fmt.Sprintf("node %s: %d pod(s) hold GPU %s, which its GPUNode does not report; not counted", n.Name, h.Pods, uuid))
		}
	}
	sort.Strings(warn)
	return warn
}

// explain turns a failed API call into an error a kubectl user can act on.
func explain(err error, server, verb, resource string) error {
	var ue *url.Error
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("RBAC denied: cannot %s %s on %s (show-gpus needs list on nodes, pods and gpunodes.tessera.io): %s",
			verb, resource, server, err.Error())
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s refused the kubeconfig's credentials (%s %s): %w", server, verb, resource, err)
	case apierrors.IsNotFound(err) && resource == "gpunodes.tessera.io":
		return fmt.Errorf("%w at %s; install them with `kubectl apply -f deploy/crds/` (or the Helm chart deploy/helm/tessera), then run the Tessera agent on the GPU nodes", ErrNoGPUNodes, server)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cluster unreachable: the API server at %s did not answer in time (%s %s): %w", server, verb, resource, err)
	case errors.As(err, &ue):
		return fmt.Errorf("cluster unreachable: the API server at %s: %w", server, ue.Err)
	}
	return fmt.Errorf("%s %s on %s: %w", verb, resource, server, err)
}

// CheckPoolLabel checks a pool label key as Kubernetes does (an optional
// DNS subdomain prefix and a name of at most 63 characters).
func CheckPoolLabel(key string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid label key: %s", key, strings.Join(errs, "; "))
	}
	return nil
}
