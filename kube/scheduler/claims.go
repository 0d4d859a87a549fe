package scheduler

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/draclaims"
)

// claimEvents pokes the loop when a claim is made (a pod may wait for
// it), or one of Tessera's driver is allocated, changes while allocated,
// or goes: the snapshot books it again.
func (e *informerEvents) claimEvents() cache.ResourceEventHandler {
	holds := func(obj any) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c, ok := obj.(*resourceapi.ResourceClaim)
		return !ok || draclaims.HoldsTesseraDevice(c)
	}
	return cache.ResourceEventHandlerFuncs{
		// Any new claim: a pod may wait for the claim of its template.
		AddFunc: func(any) { e.poke() },
		UpdateFunc: func(o, n any) {
			if holds(o) || holds(n) {
				e.inbox.clusterChanged() // a claim let go may make room
				e.poke()
			}
		},
		DeleteFunc: func(obj any) {
			if holds(obj) {
				e.inbox.clusterChanged()
				e.poke()
			}
		},
	}
}

// draEvents pokes the loop when ResourceSlices or DeviceClasses change: a
// node that publishes devices, or a class, may let a pod's claims fit.
func (e *informerEvents) draEvents() cache.ResourceEventHandler {
	changed := func() {
		e.inbox.clusterChanged()
		e.poke()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
}
