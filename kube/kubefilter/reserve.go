package kubefilter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What a scheduling cycle calls. A nil *Filter filters nothing: every pod
// keeps the caller's own exclusion, and Reserve and Unreserve hold
// nothing.

// Exclude is the node exclusion for pod over the caller's laid-out nodes
// (by position): own alone, unchanged, when Concerns(pod) is false (the
// pod keeps the by-class path and no plugin runs); otherwise own first,
// then the first plugin's rejection ("Plugin: its message") from one
// Check over every node, and concerned is true. An error is a plugin's
// or the snapshot's failure.
func (f *Filter) Exclude(ctx context.Context, pod *corev1.Pod, nodes []*corev1.Node, own func(int) string) (exclude func(int) string, concerned bool, err error) {
	if f == nil {
		return own, false, nil
	}
	if concerned, err = f.Concerns(pod); err != nil || !concerned {
		return own, false, err
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	v, err := f.Check(ctx, pod, names)
	if err != nil {
		return nil, false, err
	}
	why := make([]string, len(nodes))
	for i, n := range names {
		if r, ok := v.Rejected[n]; ok {
			why[i] = r.String()
		}
	}
	return func(i int) string {
		if own != nil {
			if w := own(i); w != "" {
				return w
			}
		}
		return why[i]
	}, true, nil
}

// Reserve assumes pod on node, the pick made for it, so that the next
// checks count it (spread, anti-affinity and ports count every pod) until
// its binding is seen (PodHandler) or Unreserve forgets it. With check
// (a pod the plugins concern) it first checks the pod again there with
// every pod assumed so far counted, the earlier picks of the cycle among
// them, and returns the rejection ("Plugin: its message") instead. A pod
// they do not concern runs no plugin, and enters the cache only when the
// next Check runs.
func (f *Filter) Reserve(ctx context.Context, pod *corev1.Pod, node string, check bool) (string, error) {
	if f == nil {
		return "", nil
	}
	if check {
		v, err := f.Check(ctx, pod, []string{node})
		if err != nil {
			return "", err
		}
		if r, ok := v.Rejected[node]; ok {
			return r.String(), nil
		}
	}
	// A shallow copy: the cache reads pods, never writes them.
	cp := *pod
	p := &cp
	p.Spec.NodeName = node
	f.amu.Lock()
	defer f.amu.Unlock()
	if _, ok := f.assumed[p.UID]; ok {
		return "", fmt.Errorf("kubefilter: reserve %s on %s: already reserved on %s", key(pod), node, f.assumed[p.UID].Spec.NodeName)
	}
	if !check {
		f.assumed[p.UID], f.deferred[p.UID] = p, true
		return "", nil
	}
	if err := f.AssumePod(p); err != nil {
		return "", fmt.Errorf("kubefilter: reserve %s on %s: %w", key(pod), node, err)
	}
	f.assumed[p.UID] = p
	return "", nil
}

// assumeDeferred puts the deferred picks in the cache.
func (f *Filter) assumeDeferred() error {
	f.amu.Lock()
	defer f.amu.Unlock()
	for uid := range f.deferred {
		delete(f.deferred, uid)
		if err := f.AssumePod(f.assumed[uid]); err != nil {
			delete(f.assumed, uid)
			return err
		}
	}
	return nil
}

// Unreserve forgets what Reserve assumed of the pod with uid (the step
// that placed it was discarded, or its binding failed). Nothing happens
// when nothing is assumed of it, or its binding was seen meanwhile.
func (f *Filter) Unreserve(uid types.UID) {
	if f == nil {
		return
	}
	f.amu.Lock()
	defer f.amu.Unlock()
	p, ok := f.assumed[uid]
	if !ok {
		return
	}
	delete(f.assumed, uid)
	if f.deferred[uid] {
		delete(f.deferred, uid)
		return
	}
	f.warn(f.ForgetPod(p))
}
