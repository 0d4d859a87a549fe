package kubefilter

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// NodeHandler keeps the cache's nodes from a node informer's events, as
// kube-scheduler's own handlers do.
func (f *Filter) NodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				f.AddNode(n)
			}
		},
		UpdateFunc: func(o, n any) {
			old, okOld := o.(*corev1.Node)
			cur, okNew := n.(*corev1.Node)
			if okOld && okNew {
				f.UpdateNode(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := unwrap(obj).(*corev1.Node); ok {
				f.warn(f.RemoveNode(n))
			}
		},
	}
}

// PodHandler keeps the cache's pods from a pod informer's events: every
// pod bound to a node, whichever scheduler placed it (spread,
// anti-affinity and ports count them all), as kube-scheduler's own
// handlers do. A pod this package assumed (Reserve) is confirmed when
// its binding is seen.
func (f *Filter) PodHandler() cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			p, ok := unwrap(obj).(*corev1.Pod)
			return ok && p.Spec.NodeName != ""
		},
		Handler: cache.ResourceEventHandlerFuncs{
			// An unbound pod turning bound arrives here as an add.
			AddFunc: func(obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					f.settled(p, f.AddPod)
				}
			},
			UpdateFunc: func(o, n any) {
				old, okOld := o.(*corev1.Pod)
				cur, okNew := n.(*corev1.Pod)
				if okOld && okNew {
					f.warn(f.UpdatePod(old, cur))
				}
			},
			DeleteFunc: func(obj any) {
				if p, ok := unwrap(obj).(*corev1.Pod); ok {
					f.settled(p, f.RemovePod)
				}
			},
		},
	}
}

// settled applies the informer's word on p (added or removed), which
// replaces what Reserve assumed of it.
func (f *Filter) settled(p *corev1.Pod, apply func(*corev1.Pod) error) {
	f.amu.Lock()
	defer f.amu.Unlock()
	delete(f.assumed, p.UID)
	delete(f.deferred, p.UID)
	delete(f.reserved, p.UID) // bound (its PreBind done) or gone
	f.warn(apply(p))
}

// unwrap is the last known object of a deleted one.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// warn logs a cache error from an event: the cache stays as
// kube-scheduler's would, and the next event of the object mends it.
func (f *Filter) warn(err error) {
	if err != nil {
		f.log.Warn("kube-scheduler cache", "err", err)
	}
}
