package kubefilter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// What a scheduling cycle calls. A nil *Filter filters nothing: every pod
// keeps the caller's own exclusion, and Reserve and Unreserve hold
// nothing.

// Exclude is the node exclusion for pod over the caller's laid-out nodes
// (by position): own alone, unchanged, when Concerns(pod) is false (the
// pod keeps the by-class path and no plugin runs); otherwise own first,
// then the first plugin's rejection ("Plugin: its message") from one
// Check over the candidates, and concerned is true. The candidates are
// the nodes own does not rule out and candidate (nil: every node) keeps:
// the caller's own measure of what could take the pod now (its GPUs and
// host resources free), so that the plugins run only where the pod could
// go. A node left out is not ruled out here: whatever later picks it
// for the pod (room freed in the cycle, victims) must check it again
// (Reserve with check, FitsWithout). preempt is the exclusion where
// victims are looked for: own, then only the rejections no preemption
// could resolve (Rejection.Unresolvable). An error is a plugin's or the
// snapshot's failure.
func (f *Filter) Exclude(ctx context.Context, pod *corev1.Pod, nodes []*corev1.Node, own func(int) string, candidate func(int) bool) (exclude, preempt func(int) string, concerned bool, err error) {
	if f == nil {
		return own, own, false, nil
	}
	if concerned, err = f.Concerns(pod); err != nil || !concerned {
		return own, own, false, err
	}
	names := make([]string, 0, len(nodes))
	at := make([]int, 0, len(nodes))
	for i, n := range nodes {
		if (own != nil && own(i) != "") || (candidate != nil && !candidate(i)) {
			continue
		}
		names, at = append(names, n.Name), append(at, i)
	}
	v, err := f.Check(ctx, pod, names)
	if err != nil {
		return nil, nil, false, err
	}
	why := make([]string, len(nodes))
	hard := make([]bool, len(nodes))
	for k, n := range names {
		if r, ok := v.Rejected[n]; ok {
			why[at[k]], hard[at[k]] = r.String(), r.Unresolvable
		}
	}
	first := func(i int, mayPreempt bool) string {
		if own != nil {
			if w := own(i); w != "" {
				return w
			}
		}
		if mayPreempt && !hard[i] {
			return ""
		}
		return why[i]
	}
	return func(i int) string { return first(i, false) }, func(i int) string { return first(i, true) }, true, nil
}

// Reserve assumes pod on node, the pick made for it, so that the next
// checks count it (spread, anti-affinity and ports count every pod) until
// its binding is seen (PodHandler) or Unreserve forgets it. With check
// (a pod the plugins concern) it first checks the pod again there with
// every pod assumed so far counted, the earlier picks of the cycle among
// them, then runs the plugins' Reserve there (VolumeBinding assumes the
// pod's volume bindings: the next pods' checks see those volumes taken),
// and returns the rejection ("Plugin: its message") instead when either
// turns the node down. A pod they do not concern runs no plugin, and
// enters the cache only when the next Check runs.
func (f *Filter) Reserve(ctx context.Context, pod *corev1.Pod, node string, check bool) (string, error) {
	if f == nil {
		return "", nil
	}
	f.amu.Lock()
	held, ok := f.assumed[pod.UID]
	f.amu.Unlock()
	if ok {
		return "", fmt.Errorf("kubefilter: reserve %s on %s: already reserved on %s", key(pod), node, held.Spec.NodeName)
	}
	// A copy (ForFramework's, or shallow: the cache and the plugins read
	// pods, never write them) with the pick as its node.
	var p *corev1.Pod
	if check {
		p = ForFramework(pod)
		v, state, err := f.check(ctx, p, []string{node})
		if err != nil {
			return "", err
		}
		if r, ok := v.Rejected[node]; ok {
			return r.String(), nil
		}
		r, why := f.reserve(ctx, state, p, node)
		if why != "" {
			return why, nil
		}
		f.amu.Lock()
		f.reserved[p.UID] = r
		f.amu.Unlock()
		p = p.DeepCopy() // the plugins keep theirs; the cache's has the pick
	} else {
		cp := *pod
		p = &cp
	}
	p.Spec.NodeName = node
	f.amu.Lock()
	defer f.amu.Unlock()
	if !check {
		f.assumed[p.UID], f.deferred[p.UID] = p, true
		return "", nil
	}
	if err := f.AssumePod(p); err != nil {
		f.unreserve(ctx, p.UID)
		return "", fmt.Errorf("kubefilter: reserve %s on %s: %w", key(pod), node, err)
	}
	f.assumed[p.UID] = p
	return "", nil
}

// reservation is what the Reserve plugins assumed for a pod on its node,
// with the cycle state they and PreBind read; preBind: a PreBind plugin
// has work to do (RunPreBindPreFlights did not skip them all).
type reservation struct {
	pod     *corev1.Pod
	node    string
	state   fwk.CycleState
	preBind bool
}

// reserve runs the Reserve plugins for p on node with the state its check
// left. A failure (a volume taken meanwhile, say) undoes what they did
// and turns the node down, as kube-scheduler's Reserve failure does.
func (f *Filter) reserve(ctx context.Context, state fwk.CycleState, p *corev1.Pod, node string) (reservation, string) {
	if st := f.fw.RunReservePluginsReserve(ctx, state, p, node); !st.IsSuccess() {
		f.fw.RunReservePluginsUnreserve(ctx, state, p, node)
		return reservation{}, rejection(st, nil).String()
	}
	pf := f.fw.RunPreBindPreFlights(ctx, state, p, node)
	return reservation{pod: p, node: node, state: state, preBind: !pf.IsSkip()}, ""
}

// PreBinds tells whether the pod with uid has PreBind work (volumes to
// bind or provision) that its binding must wait for: long enough that
// the caller runs it apart from its quick bindings.
func (f *Filter) PreBinds(uid types.UID) bool {
	if f == nil {
		return false
	}
	f.amu.Lock()
	defer f.amu.Unlock()
	return f.reserved[uid].preBind
}

// PreBind runs the PreBind plugins of the pod with uid on its reserved
// node, before its binding is written, as kube-scheduler's binding cycle
// does: VolumeBinding binds the pod's claims to the volumes it assumed
// and, for a WaitForFirstConsumer claim to provision, names the node on
// the claim (volume.kubernetes.io/selected-node) and waits until the
// provisioner's volume is bound (at most VolumeBindingArgs'
// bindTimeoutSeconds, kube-scheduler's default 600 s, or until ctx ends).
// Nothing happens for a pod with nothing to pre-bind. An error leaves the
// reservation for Unreserve.
func (f *Filter) PreBind(ctx context.Context, uid types.UID) error {
	if f == nil {
		return nil
	}
	f.amu.Lock()
	r, ok := f.reserved[uid]
	f.amu.Unlock()
	if !ok || !r.preBind {
		return nil
	}
	if st := f.fw.RunPreBindPlugins(ctx, r.state, r.pod, r.node); !st.IsSuccess() {
		return fmt.Errorf("kubefilter: pod %s on node %s: %w", key(r.pod), r.node, st.AsError())
	}
	return nil
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
// that placed it was discarded, or its binding failed), the Reserve
// plugins' assumptions included. Nothing happens when nothing is assumed
// of it, or its binding was seen meanwhile.
func (f *Filter) Unreserve(uid types.UID) {
	if f == nil {
		return
	}
	f.amu.Lock()
	defer f.amu.Unlock()
	// The Unreserve plugins are quick (VolumeBinding reverts its assume
	// cache) and take no cancellation.
	f.unreserve(klog.NewContext(context.Background(), f.logger), uid)
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

// unreserve runs the Unreserve plugins for what Reserve's plugins
// assumed of uid, if anything; amu held.
func (f *Filter) unreserve(ctx context.Context, uid types.UID) {
	r, ok := f.reserved[uid]
	if !ok {
		return
	}
	delete(f.reserved, uid)
	f.fw.RunReservePluginsUnreserve(ctx, r.state, r.pod, r.node)
}
