package scheduler

import (
	"encoding/json"
	"fmt"
	"log/slog"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/crdwatch"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// Allocated DRA claims of Tessera's driver hold GPU shares as bound pods'
// assignments do: a node may run the device plugin's pods and the DRA
// driver's claims side by side (or claims allocated by kube-scheduler next
// to pods this scheduler binds), and the snapshot books both, so no GPU
// share is handed out twice. A claim is booked once, however many pods
// name it (a shared claim), for as long as it is allocated, as a hold of
// no pod of its own (booked.Hold.For: the pods it is reserved for): it is
// charged to the first of them booked, and one pod alone holds runs with
// that pod (evicting the pod releases the claim: its template claim is
// deleted, or kube-controller-manager deallocates a claim no pod holds).
// Its pods' own CPU and memory are booked with the pods.

// claimSet are the allocated claims of Tessera's driver a snapshot
// booked, by UID.
type claimSet map[types.UID]bookedClaim

// bookedClaim is what a snapshot booked of a claim: the resourceVersion
// read and what it books (claimKey).
type bookedClaim struct {
	id, rv, key string
}

// claimKey is what a snapshot books of c: its allocation (devices,
// consumed capacity, configuration: the shares and their limits) and the
// pods it is reserved for (whose queue it is charged to), as JSON.
func claimKey(c *resourceapi.ResourceClaim) string {
	b, err := json.Marshal(struct {
		A *resourceapi.AllocationResult                `json:"a"`
		R []resourceapi.ResourceClaimConsumerReference `json:"r"`
	}{c.Status.Allocation, c.Status.ReservedFor})
	if err != nil {
		return "unreadable " + string(c.UID) + " " + c.ResourceVersion // never equal to another version's
	}
	return string(b)
}

func holdsTesseraDevice(c *resourceapi.ResourceClaim) bool {
	a := c.Status.Allocation
	if a == nil {
		return false
	}
	for _, r := range a.Devices.Results {
		if r.Driver == kdra.DriverName {
			return true
		}
	}
	return false
}

// syncClaims books the allocated claims of Tessera's driver that are new
// or book something else now, and releases those gone. A claim on a node
// the snapshot does not hold, or one that cannot be read, is logged and
// left out (and read again next time).
func (snap *snapshot) syncClaims(log *slog.Logger, cat *catalog.Catalog, claims []*resourceapi.ResourceClaim) {
	seen := make(map[types.UID]bool, len(snap.claims))
	for _, c := range claims {
		if !holdsTesseraDevice(c) {
			continue
		}
		seen[c.UID] = true
		b, ok := snap.claims[c.UID]
		if ok && b.rv == c.ResourceVersion {
			continue
		}
		key := claimKey(c)
		if ok && b.key == key {
			snap.claims[c.UID] = bookedClaim{id: b.id, rv: c.ResourceVersion, key: key}
			continue
		}
		h, err := snap.claimHold(c, cat)
		if err != nil {
			log.Warn("allocated DRA claim cannot be read; its GPUs are not counted", "claim", c.Namespace+"/"+c.Name, "err", err)
			if ok {
				snap.books.Release(b.id)
				delete(snap.claims, c.UID)
			}
			continue
		}
		if err := snap.books.Book(h); err != nil {
			log.Warn("booking an allocated DRA claim over capacity", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
		snap.claims[c.UID] = bookedClaim{id: h.ID, rv: c.ResourceVersion, key: key}
	}
	for uid, b := range snap.claims {
		if !seen[uid] {
			snap.books.Release(b.id)
			delete(snap.claims, uid)
		}
	}
}

// claimHold is what an allocated claim holds: each device as one share
// (a MIG device books as the MIG instance it stands for: cat names its
// profile), for the pods it is reserved for.
func (snap *snapshot) claimHold(c *resourceapi.ResourceClaim, cat *catalog.Catalog) (booked.Hold, error) {
	node := ""
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == kdra.DriverName {
			node = r.Pool // Tessera's pools are its nodes (kdra.Resources)
			break
		}
	}
	ni, ok := snap.books.Index(node)
	if !ok {
		return booked.Hold{}, fmt.Errorf("node %q is not among the nodes scheduled on", node)
	}
	shares, err := kdra.Shares(c, snap.inv(ni), cat)
	if err != nil {
		return booked.Hold{}, err
	}
	h := booked.Hold{ID: "claim " + string(c.UID), Node: node, For: []string{}}
	for _, sh := range shares {
		h.Groups = append(h.Groups, []binding.Share{sh})
	}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			h.For = append(h.For, c.Namespace+"/"+r.Name)
		}
	}
	return h, nil
}

// servesClaims reports whether the API server serves ResourceClaims of
// resource.k8s.io/v1 (Kubernetes 1.34 and later); where it does not, the
// scheduler books no claims.
func servesClaims(c kubernetes.Interface, log *slog.Logger) bool {
	ok, err := crdwatch.Served(c, resourceapi.SchemeGroupVersion.WithResource("resourceclaims"))
	if err != nil {
		log.Warn("cannot tell whether the API server serves DRA ResourceClaims; their GPUs are not counted", "err", err)
	}
	return ok
}

// claimEvents pokes the loop when a claim is made (a pod may wait for
// it), or one of Tessera's driver is allocated, changes while allocated,
// or goes: the snapshot books it again.
func (e *informerEvents) claimEvents() cache.ResourceEventHandler {
	holds := func(obj any) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c, ok := obj.(*resourceapi.ResourceClaim)
		return !ok || holdsTesseraDevice(c)
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
