package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/tessera-gpu/tessera/binding"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// This file allocates the DRA ResourceClaims of the pods this scheduler
// binds, as kube-scheduler's DRA plugin does, with Tessera's policy
// choosing the GPUs:
//
//   - A pod's claims are resolved once per cycle (podClaimsOf): claims it
//     names, and claims made from its templates (pod.status names them; a
//     pod whose claim is not made yet waits). A claim not allocated yet
//     adds one engine part per request of Tessera's devices (kdra.Requests),
//     placed beside the pod's GPU containers on one node; a claim already
//     allocated (shared by several pods) pins the pod to its node and adds
//     nothing: it is booked once, as an allocated claim (claims.go).
//   - When the pod is placed, the structured allocator of Kubernetes
//     allocates the claims on the GPUs the policy chose (kdra.Allocate): the
//     claim's selectors, classes, capacity policies and device taints are
//     checked by the upstream code, and other drivers' devices on the node
//     are its choice.
//   - The binding writes each claim first (the delete-protection finalizer,
//     then status.allocation and status.reservedFor, as kube-scheduler
//     does), then binds; a failed write or binding gives back what it
//     wrote. Until the informer shows a written claim, the scheduler
//     assumes it (assumedClaims), so that no later cycle hands its GPU out
//     again. Only the scheduling loop touches the assumptions: binding
//     workers report their writes through the inbox.

// claimWait says a pod cannot be placed yet because of a claim (not made
// yet, being deleted): not an error of the pod, it is tried again.
type claimWait string

func (w claimWait) Error() string { return string(w) }

// podClaims are a pending pod's DRA claims as the cycle reads them.
type podClaims struct {
	// fresh are the claims not allocated yet, which this scheduler
	// allocates on the node it picks, and reqs[i] what fresh[i] asks of
	// Tessera's GPUs (one engine part each, from parts[first] on).
	fresh []*resourceapi.ResourceClaim
	reqs  [][]kdra.ClaimRequest
	first int
	// tessera is set when some fresh claim asks for Tessera's GPUs: only
	// nodes that publish them (run the DRA driver) can take the pod.
	tessera bool
	// held are the claims already allocated (shared with pods placed
	// before): the pod goes where they are and joins them.
	held  []*resourceapi.ResourceClaim
	where []*nodeaffinity.NodeSelector // held[i]'s nodes; nil: any node
}

// podClaimsOf resolves pod's claims; nil when it has none. A claimWait
// error says the pod must wait for a claim; any other error is the pod's
// or the claim's fault.
func (s *Scheduler) podClaimsOf(pod *corev1.Pod) (*podClaims, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	if s.claims == nil {
		return nil, fmt.Errorf("spec.resourceClaims[0] (%s): the API server does not serve ResourceClaims of %s, so they cannot be allocated", pod.Spec.ResourceClaims[0].Name, resourceapi.SchemeGroupVersion)
	}
	pc := &podClaims{}
	seen := map[types.UID]bool{}
	for i := range pod.Spec.ResourceClaims {
		ref := &pod.Spec.ResourceClaims[i]
		path := fmt.Sprintf("spec.resourceClaims[%d] (%s)", i, ref.Name)
		name, mustOwn, err := resourceclaim.Name(pod, ref)
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			return nil, claimWait(fmt.Sprintf("%s: waiting for the ResourceClaim of template %s to be made (by kube-controller-manager's resourceclaim controller)", path, deref(ref.ResourceClaimTemplateName)))
		case err != nil:
			return nil, fmt.Errorf("%s: %w", path, err)
		case name == nil:
			continue // not made on purpose: nothing to allocate
		}
		c, err := s.claims.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			return nil, claimWait(fmt.Sprintf("%s: waiting for ResourceClaim %s to be created", path, *name))
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
			return nil, claimWait(fmt.Sprintf("%s: ResourceClaim %s is being deleted", path, c.Name))
		}
		if seen[c.UID] {
			continue
		}
		seen[c.UID] = true
		c = s.claimView(c)
		if a := c.Status.Allocation; a != nil {
			if !resourceclaim.IsReservedForPod(pod, c, false) && len(c.Status.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize {
				return nil, claimWait(fmt.Sprintf("%s: ResourceClaim %s is in use by %d pods, the most a claim may be (status.reservedFor)", path, c.Name, len(c.Status.ReservedFor)))
			}
			var sel *nodeaffinity.NodeSelector
			if a.NodeSelector != nil {
				if sel, err = nodeaffinity.NewNodeSelector(a.NodeSelector); err != nil {
					return nil, fmt.Errorf("%s: ResourceClaim %s: status.allocation.nodeSelector: %w", path, c.Name, err)
				}
			}
			pc.held, pc.where = append(pc.held, c), append(pc.where, sel)
			continue
		}
		reqs, _, err := kdra.Requests(c, s.cfg.Catalog)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pc.fresh, pc.reqs = append(pc.fresh, c), append(pc.reqs, reqs)
		pc.tessera = pc.tessera || len(reqs) > 0
	}
	return pc, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parts are the engine parts of the fresh claims' requests of Tessera's
// GPUs (for pod name), with their requests, in order.
func (pc *podClaims) parts(name string) ([]placement.Pod, []workload.ContainerRequest) {
	var parts []placement.Pod
	var reqs []workload.ContainerRequest
	for i, c := range pc.fresh {
		for _, r := range pc.reqs[i] {
			parts = append(parts, placement.Pod{Name: name + "/claim " + c.Name + "/" + r.Name, GPU: r.GPU})
			reqs = append(reqs, workload.ContainerRequest{GPU: r.GPU})
		}
	}
	return parts, reqs
}

// excludes says why node n cannot take the pod for its claims ("" when
// it can): a claim already allocated elsewhere, or no Tessera devices
// published on it for the claims to allocate. pools are the nodes that
// publish Tessera's devices.
func (pc *podClaims) excludes(n *corev1.Node, pools map[string]bool) string {
	for i, sel := range pc.where {
		if sel != nil && !sel.Match(n) {
			return fmt.Sprintf("ResourceClaim %s is allocated on other nodes", pc.held[i].Name)
		}
	}
	if pc.tessera && !pools[n.Name] {
		return "node publishes no DRA devices of " + kdra.DriverName + " (it runs the device plugin, not the DRA driver)"
	}
	return ""
}

// tesseraPools are the nodes whose ResourceSlices publish Tessera's
// devices (its pools are named after its nodes).
func (s *Scheduler) tesseraPools() (map[string]bool, error) {
	out := map[string]bool{}
	if s.slices == nil {
		return out, nil
	}
	all, err := s.slices.List(labels.Everything())
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

// claimWrite is one claim a binding writes: the allocation to write, or
// nil when the claim is allocated already and the pod only joins it.
type claimWrite struct {
	claim *resourceapi.ResourceClaim // as read when planned
	alloc *resourceapi.AllocationResult
	// written is closed when this binding has written (or failed to
	// write) alloc; wait, when the pod joins a claim another binding is
	// allocating, is that binding's written: the join waits for it.
	written, wait chan struct{}
}

// allocateClaims allocates the fresh claims of a pod placed on node ni
// (its parts and their decisions, the claims' parts from pc.first on)
// and returns what its binding writes, with the GPU compute and memory
// the claims take. A claim an earlier pod of this cycle allocated is
// joined when on this node; elsewhere the pod waits (outcomeUnschedulable).
func (s *Scheduler) allocateClaims(ctx context.Context, snap *snapshot, pc *podClaims, parts []placement.Pod, decisions []placement.Decision, lists *draLists) ([]claimWrite, queueing.Resources, outcome, string) {
	var use queueing.Resources
	ni := decisions[0].Node
	node := snap.nodes[ni]
	var writes []claimWrite
	for _, c := range pc.held {
		writes = append(writes, s.joinWrite(c))
	}
	chosen := map[types.UID][]string{}
	var fresh []*resourceapi.ResourceClaim
	k := pc.first
	for i, c := range pc.fresh {
		n := len(pc.reqs[i])
		if cur := s.claimView(c); cur.Status.Allocation != nil {
			// Allocated by a pod placed before this one in the cycle.
			if sel := cur.Status.Allocation.NodeSelector; sel != nil {
				if m, err := nodeaffinity.NewNodeSelector(sel); err != nil || !m.Match(node) {
					return nil, use, outcomeUnschedulable, fmt.Sprintf("ResourceClaim %s was just allocated on another node for another pod; trying again", c.Name)
				}
			}
			writes = append(writes, s.joinWrite(c))
			k += n
			continue
		}
		chosen[c.UID] = []string{}
		for j := k; j < k+n; j++ {
			for _, sh := range s.shares(snap, ni, decisions[j], parts[j].GPU) {
				chosen[c.UID] = append(chosen[c.UID], chosenDevice(sh))
				use.GPUMilli += sh.ComputeMilli
				use.GPUMemoryMiB += sh.MemoryMiB
			}
		}
		k += n
		fresh = append(fresh, c)
	}
	if len(fresh) == 0 {
		return writes, use, outcomeBound, ""
	}
	all, sl, err := lists.get(s)
	if err != nil {
		return nil, use, outcomeError, err.Error()
	}
	state := kdra.NewAllocatedState(s.withAssumedClaims(all, false))
	res, err := kdra.Allocate(ctx, kdra.Pinned{Node: node, Inventory: &snap.inv[ni], Claims: fresh, Chosen: chosen,
		Slices: sl, Classes: deviceClasses{s.classes}, State: &state, Features: kdra.SchedulerFeatures(), CEL: s.cel})
	switch {
	case errors.Is(err, kdra.ErrNoFit):
		return nil, use, outcomeUnschedulable, fmt.Sprintf("node %s: %v", node.Name, err)
	case err != nil:
		return nil, use, outcomeInvalid, err.Error()
	}
	for i, c := range fresh {
		writes = append(writes, claimWrite{claim: c, alloc: &res[i], written: make(chan struct{})})
	}
	return writes, use, outcomeBound, ""
}

// draLists are the claims and slices the informers hold, listed once per
// cycle for every pod whose claims it allocates (the claims this cycle's
// pods allocated are laid over them as assumed: withAssumedClaims). The
// zero value lists on first use; a nil one lists every time.
type draLists struct {
	done   bool
	claims []*resourceapi.ResourceClaim
	slices []*resourceapi.ResourceSlice
	err    error
}

func (l *draLists) get(s *Scheduler) ([]*resourceapi.ResourceClaim, []*resourceapi.ResourceSlice, error) {
	if l == nil {
		l = &draLists{}
	}
	if !l.done {
		l.done = true
		if l.claims, l.err = s.claims.List(labels.Everything()); l.err != nil {
			l.err = fmt.Errorf("list resource claims: %w", l.err)
		} else if l.slices, l.err = s.slices.List(labels.Everything()); l.err != nil {
			l.err = fmt.Errorf("list resource slices: %w", l.err)
		}
	}
	return l.claims, l.slices, l.err
}

// chosenDevice is the DRA device of a share the policy chose: the GPU,
// or the MIG device of the instance's profile and start (kdra.MIGDevices).
// An existing instance whose start the node did not report has no such
// name: the GPU's is given, which the allocator refuses for a MIG claim
// (the pod then waits, saying so).
func chosenDevice(sh binding.Share) string {
	if sh.MIGProfile != "" && sh.MIG != nil && sh.MIG.Start >= 0 {
		return kdra.MIGDeviceName(sh.Index, sh.MIGProfile, sh.MIG.Start)
	}
	return kdra.DeviceName(sh.Index)
}

// deviceClasses is the structured allocator's view of the DeviceClass
// lister.
type deviceClasses struct {
	l resourcelisters.DeviceClassLister
}

func (d deviceClasses) List() ([]*resourceapi.DeviceClass, error) {
	return d.l.List(labels.Everything())
}
func (d deviceClasses) Get(name string) (*resourceapi.DeviceClass, error) { return d.l.Get(name) }

// assumedClaim is a claim as this scheduler's bindings write it, over
// the informer's version base: the allocation one binding writes and the
// pods that join it, each a layer given back on its own (forgetClaims),
// so a failed join does not drop another pod's allocation.
//
// A binding writes a claim twice when it allocates it (finalizer, then
// status), so the informer may show a version between the two: while a
// layer's writes are in flight, a newer informer version becomes the base
// and the layers stay on it. Once no write is in flight, the assumption
// is dropped when the informer shows a version at least as new as the
// last one this scheduler wrote (resourceVersions compared as numbers, as
// kube-scheduler's assume cache does).
type assumedClaim struct {
	base    *resourceapi.ResourceClaim
	alloc   *resourceapi.AllocationResult // nil: none written by this scheduler
	allocBy types.UID                     // the pod whose binding writes alloc
	written chan struct{}                 // closed once allocBy's binding wrote alloc or failed to
	layers  []claimLayer
	doneRV  int64                      // the newest version this scheduler's writes made
	view    *resourceapi.ResourceClaim // base with alloc and the layers' pods
}

// claimLayer is one pod's reservation of an assumed claim.
type claimLayer struct {
	pod      resourceapi.ResourceClaimConsumerReference
	inFlight bool // its binding has not written it yet
}

// assumeClaims records what pod's binding will write to its claims, so
// that later pods and cycles see the claims allocated and joined before
// the informer does.
func (s *Scheduler) assumeClaims(pod *corev1.Pod, ws []claimWrite) {
	for _, w := range ws {
		a, ok := s.assumedClaims[w.claim.UID]
		if !ok {
			a = &assumedClaim{base: w.claim}
			s.assumedClaims[w.claim.UID] = a
		}
		// Another binding's allocation in flight is not replaced: this
		// one's write of the same version then fails on a conflict.
		if w.alloc != nil && a.alloc == nil {
			a.alloc, a.allocBy, a.written = w.alloc, pod.UID, w.written
		}
		if i := a.layer(pod.UID); i >= 0 {
			a.layers[i].inFlight = true
		} else {
			a.layers = append(a.layers, claimLayer{pod: consumerOf(pod), inFlight: true})
		}
		a.rebuild()
	}
}

func (a *assumedClaim) layer(uid types.UID) int {
	return slices.IndexFunc(a.layers, func(l claimLayer) bool { return l.pod.UID == uid })
}

// rebuild makes a.view: the base claim with what bindings write.
func (a *assumedClaim) rebuild() {
	v := a.base.DeepCopy()
	if a.alloc != nil && v.Status.Allocation == nil {
		v.Status.Allocation = a.alloc
	}
	for _, l := range a.layers {
		if !slices.ContainsFunc(v.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == l.pod.UID }) {
			v.Status.ReservedFor = append(v.Status.ReservedFor, l.pod)
		}
	}
	a.view = v
}

// claimWritten records that pod's binding wrote claim uid, making
// version rv.
func (s *Scheduler) claimWritten(uid, pod types.UID, rv string) {
	a, ok := s.assumedClaims[uid]
	if !ok {
		return
	}
	if i := a.layer(pod); i >= 0 {
		a.layers[i].inFlight = false
	}
	if n, err := strconv.ParseInt(rv, 10, 64); err == nil && n > a.doneRV {
		a.doneRV = n
	}
}

// forgetClaims drops what assumeClaims recorded of pod's binding ws.
func (s *Scheduler) forgetClaims(pod *corev1.Pod, ws []claimWrite) {
	for _, w := range ws {
		a, ok := s.assumedClaims[w.claim.UID]
		if !ok {
			continue
		}
		if i := a.layer(pod.UID); i >= 0 {
			a.layers = slices.Delete(a.layers, i, i+1)
		}
		if a.allocBy == pod.UID {
			a.alloc, a.allocBy, a.written = nil, "", nil
		}
		if len(a.layers) == 0 {
			delete(s.assumedClaims, w.claim.UID)
			continue
		}
		a.rebuild()
	}
}

// joinWrite is the write of a pod joining claim c (allocated, or being
// allocated by an earlier binding, whose write the join then waits for).
func (s *Scheduler) joinWrite(c *resourceapi.ResourceClaim) claimWrite {
	if a, ok := s.assumedClaims[c.UID]; ok && a.base.ResourceVersion == c.ResourceVersion {
		return claimWrite{claim: a.view, wait: a.written}
	}
	return claimWrite{claim: c}
}

// claimView is c as this scheduler assumes it (its own allocation or
// reservation not yet seen by the informer), else c.
func (s *Scheduler) claimView(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	return s.joinWrite(c).claim
}

// withAssumedClaims is claims (the informer's) with the assumed versions
// in their place. With prune (once per cycle), an assumption whose claim
// the informer shows changed is moved onto the new version while its
// writes are in flight, and dropped once the informer has caught up with
// them; one whose claim is gone is dropped.
func (s *Scheduler) withAssumedClaims(claims []*resourceapi.ResourceClaim, prune bool) []*resourceapi.ResourceClaim {
	if len(s.assumedClaims) == 0 {
		return claims
	}
	out := slices.Clone(claims)
	live := map[types.UID]bool{}
	for i, c := range out {
		a, ok := s.assumedClaims[c.UID]
		if !ok {
			continue
		}
		live[c.UID] = true
		if a.base.ResourceVersion == c.ResourceVersion {
			out[i] = a.view
			continue
		}
		if !prune {
			continue
		}
		rv, err := strconv.ParseInt(c.ResourceVersion, 10, 64)
		if slices.ContainsFunc(a.layers, func(l claimLayer) bool { return l.inFlight }) || (err == nil && rv < a.doneRV) {
			a.base = c
			a.rebuild()
			out[i] = a.view
			continue
		}
		delete(s.assumedClaims, c.UID)
	}
	if prune {
		for uid := range s.assumedClaims {
			if !live[uid] {
				delete(s.assumedClaims, uid)
			}
		}
	}
	return out
}

func consumerOf(pod *corev1.Pod) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// writeClaims writes what pod's binding needs of its claims: an
// allocation with the delete-protection finalizer (as kube-scheduler
// writes it), and the pod in each claim's status.reservedFor. It stops at
// the first failure; undoClaims gives back what was written.
func (s *Scheduler) writeClaims(ctx context.Context, pod *corev1.Pod, ws []claimWrite) error {
	api := s.cfg.Client.ResourceV1().ResourceClaims(pod.Namespace)
	defer func() {
		for _, w := range ws {
			if w.written != nil {
				close(w.written)
			}
		}
	}()
	for _, w := range ws {
		if w.wait != nil {
			select {
			case <-w.wait:
			case <-ctx.Done():
				return fmt.Errorf("ResourceClaim %s: waiting for another pod's binding to allocate it: %w", w.claim.Name, ctx.Err())
			}
		}
		if w.alloc != nil {
			c := w.claim.DeepCopy()
			if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
				c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
				var err error
				if c, err = api.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("ResourceClaim %s: add finalizer %s: %w", w.claim.Name, resourceapi.Finalizer, err)
				}
			}
			c.Status.Allocation = w.alloc
			c.Status.ReservedFor = append(c.Status.ReservedFor, consumerOf(pod))
			out, err := api.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("ResourceClaim %s: write its allocation: %w", w.claim.Name, err)
			}
			s.inbox.claimsDone(claimReport{uid: w.claim.UID, pod: pod.UID, rv: out.ResourceVersion})
			continue
		}
		var rv string
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := api.Get(ctx, w.claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c.UID != w.claim.UID || c.Status.Allocation == nil {
				return fmt.Errorf("not allocated (any more): pod %s/%s cannot join it", pod.Namespace, pod.Name)
			}
			// The pod was placed for the allocation it was planned with:
			// another binding may have allocated the claim elsewhere.
			if !sameDevices(c.Status.Allocation, w.claim.Status.Allocation) {
				return fmt.Errorf("allocated otherwise than pod %s/%s was placed for (another binding allocated it first); trying again", pod.Namespace, pod.Name)
			}
			if resourceclaim.IsReservedForPod(pod, c, false) {
				rv = c.ResourceVersion
				return nil
			}
			c.Status.ReservedFor = append(c.Status.ReservedFor, consumerOf(pod))
			out, err := api.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			if err == nil {
				rv = out.ResourceVersion
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("ResourceClaim %s: reserve it for the pod: %w", w.claim.Name, err)
		}
		s.inbox.claimsDone(claimReport{uid: w.claim.UID, pod: pod.UID, rv: rv})
	}
	return nil
}

// sameDevices reports whether two allocations hold the same devices.
func sameDevices(a, b *resourceapi.AllocationResult) bool {
	if a == nil || b == nil {
		return a == b
	}
	key := func(r resourceapi.DeviceRequestAllocationResult) string {
		return r.Request + "\x00" + r.Driver + "\x00" + r.Pool + "\x00" + r.Device
	}
	return slices.Equal(sortedKeys(a.Devices.Results, key), sortedKeys(b.Devices.Results, key))
}

func sortedKeys[T any](xs []T, key func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = key(x)
	}
	slices.Sort(out)
	return out
}

// undoClaims gives back what writeClaims wrote for pod: the pod leaves
// each claim's reservedFor, and a claim this binding allocated that no
// other pod holds is deallocated and loses its finalizer. Failures are
// logged: kube-controller-manager's resourceclaim controller also drops
// pods that do not exist or will not run from reservedFor.
func (s *Scheduler) undoClaims(ctx context.Context, pod *corev1.Pod, ws []claimWrite) {
	api := s.cfg.Client.ResourceV1().ResourceClaims(pod.Namespace)
	for i := len(ws) - 1; i >= 0; i-- {
		w := ws[i]
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := api.Get(ctx, w.claim.Name, metav1.GetOptions{})
			if err != nil || c.UID != w.claim.UID {
				return err
			}
			kept := slices.DeleteFunc(slices.Clone(c.Status.ReservedFor), func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == pod.UID })
			// Allocated by this binding and held by no other pod: deallocate.
			mine := w.alloc != nil && len(kept) == 0
			if len(kept) != len(c.Status.ReservedFor) || (mine && c.Status.Allocation != nil) {
				c.Status.ReservedFor = kept
				if mine {
					c.Status.Allocation = nil
				}
				if c, err = api.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			if mine && slices.Contains(c.Finalizers, resourceapi.Finalizer) {
				c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
				_, err = api.Update(ctx, c, metav1.UpdateOptions{})
			}
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			s.cfg.Log.Warn("giving back a ResourceClaim after a failed binding", "claim", pod.Namespace+"/"+w.claim.Name, "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
}
