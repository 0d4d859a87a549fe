package draclaims

import (
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/tessera-gpu/tessera/catalog"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// Config configures an Allocator.
type Config struct {
	// Claims, Slices and Classes list the informers' ResourceClaims,
	// ResourceSlices and DeviceClasses; Claims nil: the API server does
	// not serve resource.k8s.io/v1, and a pod that names a claim is
	// refused, saying so.
	Claims  resourcelisters.ResourceClaimLister
	Slices  resourcelisters.ResourceSliceLister
	Classes resourcelisters.DeviceClassLister
	// Client writes the claims (Write, Undo).
	Client kubernetes.Interface
	// Catalog reads a claim's request as Tessera's (kdra.Requests).
	Catalog *catalog.Catalog
	// CEL caches the claims' compiled selectors (default: a cache of 100).
	CEL *cel.Cache
	// Log receives what Undo could not give back (default slog.Default()).
	Log *slog.Logger
}

// Allocator resolves, allocates, assumes and writes the pods' claims.
// Write and Undo read only its configuration and run on binding workers;
// every other method is the scheduling loop's alone (the assumptions are
// not safe for concurrent use: binding workers report what they wrote to
// the loop, which records it with Wrote or Forget).
type Allocator struct {
	cfg Config
	// assumed are the claims bindings allocate or join, as written, until
	// the informer shows them (assume.go).
	assumed map[types.UID]*assumedClaim
}

// New builds an Allocator.
func New(cfg Config) *Allocator {
	if cfg.CEL == nil {
		cfg.CEL = cel.NewCache(100, cel.Features{})
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Allocator{cfg: cfg, assumed: map[types.UID]*assumedClaim{}}
}

// Wait says a pod cannot be placed (yet, or on this node) because of a
// claim: a claim not made yet or being deleted, one that fits no device
// the policy chose: not an error of the pod, it is tried again.
type Wait string

func (w Wait) Error() string { return string(w) }

// Invalid is the structured allocator's refusal of a claim on the devices
// the policy chose for a reason of the claim's own (a selector that
// cannot be evaluated, a MIG profile asked of the whole-GPU class).
type Invalid struct{ Err error }

func (e Invalid) Error() string { return e.Err.Error() }
func (e Invalid) Unwrap() error { return e.Err }

// PodClaims are a pending pod's DRA claims as the cycle reads them.
type PodClaims struct {
	// fresh are the claims not allocated yet, which the scheduler
	// allocates on the node it picks, and reqs[i] what fresh[i] asks of
	// Tessera's GPUs (one engine part each, from the pod's part first on).
	fresh []*resourceapi.ResourceClaim
	reqs  [][]kdra.ClaimRequest
	first int
	// pools are the nodes that publish Tessera's devices, read when some
	// fresh claim asks for them (nil otherwise): only those nodes (which
	// run the DRA driver) can take the pod.
	pools map[string]bool
	// held are the claims already allocated (shared with pods placed
	// before): the pod goes where they are and joins them.
	held  []*resourceapi.ResourceClaim
	where []*nodeaffinity.NodeSelector // held[i]'s nodes; nil: any node
}

// PodClaims resolves pod's claims; nil when it has none. A claim not
// allocated yet adds one engine part per request of Tessera's devices
// (kdra.Requests), placed beside the pod's GPU containers on one node; a
// claim already allocated (shared by several pods, or by this scheduler's
// bindings: assumed) pins the pod to its node and adds nothing. A Wait
// error says the pod must wait for a claim; any other error is the pod's
// or the claim's fault.
func (a *Allocator) PodClaims(pod *corev1.Pod) (*PodClaims, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	if a.cfg.Claims == nil {
		return nil, fmt.Errorf("spec.resourceClaims[0] (%s): the API server does not serve ResourceClaims of %s, so they cannot be allocated", pod.Spec.ResourceClaims[0].Name, resourceapi.SchemeGroupVersion)
	}
	pc := &PodClaims{}
	seen := map[types.UID]bool{}
	tessera := false
	for i := range pod.Spec.ResourceClaims {
		ref := &pod.Spec.ResourceClaims[i]
		path := fmt.Sprintf("spec.resourceClaims[%d] (%s)", i, ref.Name)
		name, mustOwn, err := resourceclaim.Name(pod, ref)
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			return nil, Wait(fmt.Sprintf("%s: waiting for the ResourceClaim of template %s to be made (by kube-controller-manager's resourceclaim controller)", path, deref(ref.ResourceClaimTemplateName)))
		case err != nil:
			return nil, fmt.Errorf("%s: %w", path, err)
		case name == nil:
			continue // not made on purpose: nothing to allocate
		}
		c, err := a.cfg.Claims.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			return nil, Wait(fmt.Sprintf("%s: waiting for ResourceClaim %s to be created", path, *name))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read ResourceClaim %s: %w", path, *name, err)
		}
		if mustOwn {
			if err := resourceclaim.IsForPod(pod, c, false); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		if c.DeletionTimestamp != nil {
			return nil, Wait(fmt.Sprintf("%s: ResourceClaim %s is being deleted", path, c.Name))
		}
		if seen[c.UID] {
			continue
		}
		seen[c.UID] = true
		c = a.view(c)
		if al := c.Status.Allocation; al != nil {
			if !resourceclaim.IsReservedForPod(pod, c, false) && len(c.Status.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize {
				return nil, Wait(fmt.Sprintf("%s: ResourceClaim %s is in use by %d pods, the most a claim may be (status.reservedFor)", path, c.Name, len(c.Status.ReservedFor)))
			}
			var sel *nodeaffinity.NodeSelector
			if al.NodeSelector != nil {
				if sel, err = nodeaffinity.NewNodeSelector(al.NodeSelector); err != nil {
					return nil, fmt.Errorf("%s: ResourceClaim %s: status.allocation.nodeSelector: %w", path, c.Name, err)
				}
			}
			pc.held, pc.where = append(pc.held, c), append(pc.where, sel)
			continue
		}
		reqs, _, err := kdra.Requests(c, a.cfg.Catalog)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pc.fresh, pc.reqs = append(pc.fresh, c), append(pc.reqs, reqs)
		tessera = tessera || len(reqs) > 0
	}
	if tessera {
		var err error
		if pc.pools, err = a.pools(); err != nil {
			return nil, err
		}
	}
	return pc, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AppendParts appends the engine parts of the fresh claims' requests of
// Tessera's GPUs (for the pod named name), with their requests, in order,
// to the pod's parts and reqs, and remembers where they start (Allocate
// reads their decisions from there).
func (pc *PodClaims) AppendParts(name string, parts []placement.Pod, reqs []workload.ContainerRequest) ([]placement.Pod, []workload.ContainerRequest) {
	pc.first = len(parts)
	for i, c := range pc.fresh {
		for _, r := range pc.reqs[i] {
			parts = append(parts, placement.Pod{Name: name + "/claim " + c.Name + "/" + r.Name, GPU: r.GPU})
			reqs = append(reqs, workload.ContainerRequest{GPU: r.GPU})
		}
	}
	return parts, reqs
}

// Excludes says why node n cannot take the pod for its claims ("" when
// it can): a claim already allocated elsewhere, or no Tessera devices
// published on it for the claims to allocate.
func (pc *PodClaims) Excludes(n *corev1.Node) string {
	for i, sel := range pc.where {
		if sel != nil && !sel.Match(n) {
			return fmt.Sprintf("ResourceClaim %s is allocated on other nodes", pc.held[i].Name)
		}
	}
	if pc.pools != nil && !pc.pools[n.Name] {
		return "node publishes no DRA devices of " + kdra.DriverName + " (it runs the device plugin, not the DRA driver)"
	}
	return ""
}

// pools are the nodes whose ResourceSlices publish Tessera's devices (its
// pools are named after its nodes); never nil.
func (a *Allocator) pools() (map[string]bool, error) {
	out := map[string]bool{}
	if a.cfg.Slices == nil {
		return out, nil
	}
	all, err := a.cfg.Slices.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list resource slices: %w", err)
	}
	for _, sl := range all {
		if sl.Spec.Driver == kdra.DriverName && len(sl.Spec.Devices) > 0 {
			out[sl.Spec.Pool.Name] = true
		}
	}
	return out, nil
}
