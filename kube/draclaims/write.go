package draclaims

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// Write writes what pod's binding needs of its claims ws before the pod
// is bound: an allocation with the delete-protection finalizer, then
// status.allocation and status.reservedFor (as kube-scheduler writes
// them), and the pod in the reservedFor of each claim it joins (after the
// binding that allocates it, when one is in flight). Each write made is
// reported to done, for the scheduling loop to record (Wrote). It stops
// at the first failure; Undo gives back what was written. Binding
// workers call it: it touches no assumption.
func (a *Allocator) Write(ctx context.Context, pod *corev1.Pod, ws []Write, done func(Written)) error {
	if len(ws) == 0 {
		return nil
	}
	api := a.cfg.Client.ResourceV1().ResourceClaims(pod.Namespace)
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
			done(Written{Claim: w.claim.UID, Pod: pod.UID, Version: out.ResourceVersion})
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
		done(Written{Claim: w.claim.UID, Pod: pod.UID, Version: rv})
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

// Undo gives back what Write wrote for pod: the pod leaves each claim's
// reservedFor, and a claim its binding allocated that no other pod holds
// is deallocated and loses its finalizer. Failures are logged:
// kube-controller-manager's resourceclaim controller also drops pods that
// do not exist or will not run from reservedFor. Binding workers call
// it: it touches no assumption (the loop forgets them: Forget).
func (a *Allocator) Undo(ctx context.Context, pod *corev1.Pod, ws []Write) {
	if len(ws) == 0 {
		return
	}
	api := a.cfg.Client.ResourceV1().ResourceClaims(pod.Namespace)
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
			a.cfg.Log.Warn("giving back a ResourceClaim after a failed binding", "claim", pod.Namespace+"/"+w.claim.Name, "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
}
