package scheduler

import (
	"maps"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/membership"
)

// This file turns informer events into what the next cycle looks at:
// the nodes and pods marked changed, and news for the core (the cluster
// changed in a way that may make room; a waiting pod was respecified),
// which ends backoffs early, as kube-scheduler's queueing hints do.

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
// unbound, naming it, not being deleted (assumed pods included), and
// without scheduling gates (as kube-scheduler's SchedulingGates plugin: a
// gated pod waits for its gates to be removed, with the PodScheduled
// condition the API server gave it; the update that removes the last one
// makes it wait for this scheduler).
func waitsFor(name string, p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.Spec.SchedulerName == name && p.DeletionTimestamp == nil && len(p.Spec.SchedulingGates) == 0
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

// marks collects the keys of the objects that changed (nodes by name,
// pods by namespace/name) for the next cycle: informer event handlers
// mark them, so that a cycle looks at what changed, not at every object.
// Its zero value is ready; safe for concurrent use.
type marks struct {
	mu    sync.Mutex
	names map[string]bool
}

// mark records that the object obj (or a deleted one's tombstone)
// names changed (a GPUNode names its node).
func (m *marks) mark(obj any) {
	name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil {
		m.names = map[string]bool{}
	}
	m.names[name] = true
}

// take returns the names marked since the last take (never nil).
func (m *marks) take() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.names
	m.names = nil
	if names == nil {
		names = map[string]bool{}
	}
	return names
}
