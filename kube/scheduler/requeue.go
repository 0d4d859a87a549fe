package scheduler

import (
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/membership"
)

// This file decides when a pod that failed is tried again: every failure
// goes through reject (or a failed binding), which backs the pod, or its
// gang, off; informer events that may help end the wait early, as
// kube-scheduler moves pods back to its active queue on cluster events.

// informerEvents are the informers' event handlers. They run on the
// informers' goroutines, so they reach only what is safe there (the
// inbox, the marks, the loop's wake channel, the listers' readers), never
// the scheduling loop's own state.
type informerEvents struct {
	name    string // the schedulerName served
	members *membership.Reader
	inbox   *inbox
	// nodes and pods mark what changed for the next cycle.
	nodes, pods *marks
	wake        chan struct{}
}

func (e *informerEvents) poke() { wakeUp(e.wake) }

// wakeUp wakes the scheduling loop (once, however many ask meanwhile).
func wakeUp(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// waitsFor reports whether a pod is the named scheduler's to bind:
// unbound, naming it, not being deleted (assumed pods included).
func waitsFor(name string, p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.Spec.SchedulerName == name && p.DeletionTimestamp == nil
}

// added handles a new node, Job, Queue, PodGroup or GPUNode: it may make
// room, so it ends the waits of pods that did not fit. Objects listed when a
// watch starts are not news: the scheduler reads them before it decides.
func (e *informerEvents) added(_ any, isInInitialList bool) {
	if !isInInitialList {
		e.inbox.clusterChanged()
	}
	e.poke()
}

// nodeEvents pokes the loop and ends the waits of pods that did not fit
// when a node is added, goes, or changes in a way that may make room:
// allocatable, labels, taints, schedulability or readiness; a change of its
// annotations or capacity (where an inventory may be read) pokes the loop
// too. A heartbeat (status only) does neither.
// Every node event also marks the node changed for the cycle's snapshot
// (snapshot.go).
func (e *informerEvents) nodeEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			e.nodes.mark(obj)
			e.added(obj, isInInitialList)
		},
		UpdateFunc: func(o, n any) {
			e.nodes.mark(n)
			old, okOld := o.(*corev1.Node)
			cur, okNew := n.(*corev1.Node)
			if !okOld || !okNew || nodeMayHelp(old, cur) {
				e.inbox.clusterChanged()
				e.poke()
			} else if !maps.Equal(old.Annotations, cur.Annotations) || !equality.Semantic.DeepEqual(old.Status.Capacity, cur.Status.Capacity) {
				e.poke() // an inventory may be read from them
			}
		},
		DeleteFunc: func(obj any) {
			e.nodes.mark(obj)
			e.poke()
		},
	}
}

// inventoryEvents handles the events of GPUNode objects (each named after
// its node): it marks the node changed and passes the event on to then.
func (e *informerEvents) inventoryEvents(then cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			e.nodes.mark(obj)
			then.OnAdd(obj, isInInitialList)
		},
		UpdateFunc: func(o, n any) {
			e.nodes.mark(n)
			then.OnUpdate(o, n)
		},
		DeleteFunc: func(obj any) {
			e.nodes.mark(obj)
			then.OnDelete(obj)
		},
	}
}

func nodeMayHelp(old, cur *corev1.Node) bool {
	return old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		ready(old) != ready(cur) ||
		!maps.Equal(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// podEvents pokes the loop on pod events a cycle must act on (additions,
// deletions, podUpdateMatters) and ends waits when the event
// may help: a pod that held resources is deleted or finishes (room for
// the pods that did not fit), a gang gains a pending member (it may now be
// complete), or a waiting pod's own spec, labels or annotations change (a
// fixed request: its count starts over).
func (e *informerEvents) podEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { // a gang's new member ends its wait (the core's Add)
			e.pods.mark(obj)
			e.poke()
		},
		UpdateFunc: func(o, n any) {
			e.pods.mark(n)
			old, okOld := o.(*corev1.Pod)
			cur, okNew := n.(*corev1.Pod)
			switch {
			case !okOld || !okNew:
			case boundpods.Occupies(old) && !boundpods.Occupies(cur):
				e.inbox.clusterChanged()
			case waitsFor(e.name, cur):
				e.podChanged(old, cur)
			}
			if !okOld || !okNew || e.podUpdateMatters(old, cur) {
				e.poke()
			}
		},
		DeleteFunc: func(obj any) {
			e.pods.mark(obj)
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); !ok || boundpods.Occupies(p) {
				e.inbox.clusterChanged()
			}
			e.poke()
		},
	}
}

// podUpdateMatters reports whether a pod update may change what a cycle
// does, so that the loop runs one: a pod waiting for this scheduler (or no
// longer), one that starts or stops occupying its node, and a bound pod
// whose booking or queue changed. Status updates of bound pods (phase,
// conditions, container states: most of a busy cluster's pod events)
// change nothing a cycle reads; the next cycle takes them in anyway.
func (e *informerEvents) podUpdateMatters(old, cur *corev1.Pod) bool {
	if waitsFor(e.name, old) || waitsFor(e.name, cur) {
		return true
	}
	occOld, occCur := boundpods.Occupies(old), boundpods.Occupies(cur)
	if occOld != occCur {
		return true
	}
	if !occCur {
		return false // neither waits for us nor holds anything
	}
	return holdKey(old) != holdKey(cur) || e.members.Queue(old) != e.members.Queue(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil)
}

// podChanged starts a waiting pod's backoff over when the pod itself
// changed (not its conditions, which this scheduler writes), or the
// claims made from its templates did (kube-controller-manager names them
// in its status).
func (e *informerEvents) podChanged(old, cur *corev1.Pod) {
	if maps.Equal(old.Labels, cur.Labels) && maps.Equal(old.Annotations, cur.Annotations) && equality.Semantic.DeepEqual(old.Spec, cur.Spec) &&
		resourceclaim.PodStatusEqual(old.Status.ResourceClaimStatuses, cur.Status.ResourceClaimStatuses) {
		return
	}
	e.inbox.podRespecified(cur.Namespace + "/" + cur.Name)
}

// jobEvents pokes the loop on every Job event and ends waits when a Job is
// created or its parallelism (an automatic gang's minimum) changes.
func (e *informerEvents) jobEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: e.added,
		UpdateFunc: func(o, n any) {
			old, okOld := o.(*batchv1.Job)
			cur, okNew := n.(*batchv1.Job)
			if !okOld || !okNew || membership.Parallelism(old) != membership.Parallelism(cur) {
				e.inbox.clusterChanged()
			}
			e.poke()
		},
		DeleteFunc: func(any) { e.poke() },
	}
}

// changeEvents pokes the loop and ends waits on every event (for Queues,
// PodGroups and GPUNodes).
func (e *informerEvents) changeEvents() cache.ResourceEventHandler {
	changed := func() { e.inbox.clusterChanged(); e.poke() }
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    e.added,
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
}
