package draclaims

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Until the informer shows a claim a binding wrote, the Allocator assumes
// it, so that no later pod or cycle hands its GPU out again. Only the
// scheduling loop touches the assumptions: binding workers report their
// writes (Written) and failures to it, and it records them (Wrote,
// Forget).

// Write is one claim a binding writes: the allocation to write, or none
// when the claim is allocated already and the pod only joins it.
type Write struct {
	claim *resourceapi.ResourceClaim // as read when planned
	alloc *resourceapi.AllocationResult
	// written is closed when this binding has written (or failed to
	// write) alloc; wait, when the pod joins a claim another binding is
	// allocating, is that binding's written: the join waits for it.
	written, wait chan struct{}
}

// Written is what one claim write made: the binding of pod Pod wrote
// claim Claim, making its version Version. Binding workers report it to
// the scheduling loop, which records it (Wrote).
type Written struct {
	Claim, Pod types.UID
	Version    string
}

// assumedClaim is a claim as this scheduler's bindings write it, over
// the informer's version base: the allocation one binding writes and the
// pods that join it, each a layer given back on its own (Forget), so a
// failed join does not drop another pod's allocation.
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

// Assume records what pod's binding will write to its claims (ws), so
// that later pods and cycles see the claims allocated and joined before
// the informer does.
func (a *Allocator) Assume(pod *corev1.Pod, ws []Write) {
	for _, w := range ws {
		ac, ok := a.assumed[w.claim.UID]
		if !ok {
			ac = &assumedClaim{base: w.claim}
			a.assumed[w.claim.UID] = ac
		}
		// Another binding's allocation in flight is not replaced: this
		// one's write of the same version then fails on a conflict.
		if w.alloc != nil && ac.alloc == nil {
			ac.alloc, ac.allocBy, ac.written = w.alloc, pod.UID, w.written
		}
		if i := ac.layer(pod.UID); i >= 0 {
			ac.layers[i].inFlight = true
		} else {
			ac.layers = append(ac.layers, claimLayer{pod: consumerOf(pod), inFlight: true})
		}
		ac.rebuild()
	}
}

func (ac *assumedClaim) layer(uid types.UID) int {
	return slices.IndexFunc(ac.layers, func(l claimLayer) bool { return l.pod.UID == uid })
}

// rebuild makes ac.view: the base claim with what bindings write.
func (ac *assumedClaim) rebuild() {
	v := ac.base.DeepCopy()
	if ac.alloc != nil && v.Status.Allocation == nil {
		v.Status.Allocation = ac.alloc
	}
	for _, l := range ac.layers {
		if !slices.ContainsFunc(v.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == l.pod.UID }) {
			v.Status.ReservedFor = append(v.Status.ReservedFor, l.pod)
		}
	}
	ac.view = v
}

// Wrote records what a binding reported it wrote.
func (a *Allocator) Wrote(w Written) {
	ac, ok := a.assumed[w.Claim]
	if !ok {
		return
	}
	if i := ac.layer(w.Pod); i >= 0 {
		ac.layers[i].inFlight = false
	}
	if n, err := strconv.ParseInt(w.Version, 10, 64); err == nil && n > ac.doneRV {
		ac.doneRV = n
	}
}

// Forget drops what Assume recorded of pod's binding ws (the step that
// planned it was discarded, or the binding failed).
func (a *Allocator) Forget(pod *corev1.Pod, ws []Write) {
	for _, w := range ws {
		ac, ok := a.assumed[w.claim.UID]
		if !ok {
			continue
		}
		if i := ac.layer(pod.UID); i >= 0 {
			ac.layers = slices.Delete(ac.layers, i, i+1)
		}
		if ac.allocBy == pod.UID {
			ac.alloc, ac.allocBy, ac.written = nil, "", nil
		}
		if len(ac.layers) == 0 {
			delete(a.assumed, w.claim.UID)
			continue
		}
		ac.rebuild()
	}
}

// join is the write of a pod joining claim c (allocated, or being
// allocated by an earlier binding, whose write the join then waits for).
func (a *Allocator) join(c *resourceapi.ResourceClaim) Write {
	if ac, ok := a.assumed[c.UID]; ok && ac.base.ResourceVersion == c.ResourceVersion {
		return Write{claim: ac.view, wait: ac.written}
	}
	return Write{claim: c}
}

// view is c as this scheduler assumes it (its own allocation or
// reservation not yet seen by the informer), else c.
func (a *Allocator) view(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	return a.join(c).claim
}

// Claims are the claims the informer holds with the assumed versions in
// their place, for the snapshot to book (none where claims are not
// served). Called once per cycle, it also prunes: an assumption whose
// claim the informer shows changed is moved onto the new version while
// its writes are in flight, and dropped once the informer has caught up
// with them; one whose claim is gone is dropped.
func (a *Allocator) Claims() ([]*resourceapi.ResourceClaim, error) {
	var claims []*resourceapi.ResourceClaim
	if a.cfg.Claims != nil {
		var err error
		if claims, err = a.cfg.Claims.List(labels.Everything()); err != nil {
			return nil, fmt.Errorf("list resource claims: %w", err)
		}
	}
	return a.lay(claims, true), nil
}

// lay is claims (the informer's) with the assumed versions in their
// place; with prune, as Claims says.
func (a *Allocator) lay(claims []*resourceapi.ResourceClaim, prune bool) []*resourceapi.ResourceClaim {
	if len(a.assumed) == 0 {
		return claims
	}
	out := slices.Clone(claims)
	live := map[types.UID]bool{}
	for i, c := range out {
		ac, ok := a.assumed[c.UID]
		if !ok {
			continue
		}
		live[c.UID] = true
		if ac.base.ResourceVersion == c.ResourceVersion {
			out[i] = ac.view
			continue
		}
		if !prune {
			continue
		}
		rv, err := strconv.ParseInt(c.ResourceVersion, 10, 64)
		if slices.ContainsFunc(ac.layers, func(l claimLayer) bool { return l.inFlight }) || (err == nil && rv < ac.doneRV) {
			ac.base = c
			ac.rebuild()
			out[i] = ac.view
			continue
		}
		delete(a.assumed, c.UID)
	}
	if prune {
		for uid := range a.assumed {
			if !live[uid] {
				delete(a.assumed, uid)
			}
		}
	}
	return out
}

func consumerOf(pod *corev1.Pod) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}
