package scheduler

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/catalog"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Allocated DRA claims of Tessera's driver hold GPU shares as bound pods'
// assignments do: a node may run the device plugin's pods and the DRA
// driver's claims side by side (or claims allocated by kube-scheduler next
// to pods this scheduler binds), and the snapshot books both, so no GPU
// share is handed out twice. A claim is booked once, however many pods
// name it (a shared claim), for as long as it is allocated: its pods'
// own CPU and memory are booked with the pods.
//
// Claims change the snapshot only through a rebuild (snapshotCache.update
// compares the set of allocated claims): their bookings are never released
// in place.

// claimSet identifies the allocated claims of Tessera's driver a snapshot
// booked, by UID: the version read and what was booked of it.
type claimSet map[types.UID]bookedClaim

// bookedClaim is one claim of a claimSet: its resourceVersion, the claim
// (to read what it books, on demand) and that, once worked out.
type bookedClaim struct {
	rv    string
	claim *resourceapi.ResourceClaim
	key   string // claimKey, "" until worked out
}

// allocatedClaims returns the claims that hold devices of Tessera's driver.
func allocatedClaims(claims []*resourceapi.ResourceClaim) ([]*resourceapi.ResourceClaim, claimSet) {
	var out []*resourceapi.ResourceClaim
	set := claimSet{}
	for _, c := range claims {
		if holdsTesseraDevice(c) {
			out = append(out, c)
			set[c.UID] = bookedClaim{rv: c.ResourceVersion, claim: c}
		}
	}
	return out, set
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

// diff compares the claims the snapshot booked (cs) with the allocated
// claims now (o). same is false when one it booked is gone or books
// something else now (its allocation or reservations changed); a newer
// version that books the same (a finalizer added, the status this
// scheduler assumed written) is recorded in cs instead. added are the
// claims of o the snapshot has not booked yet.
func (cs claimSet) diff(o claimSet) (added []*resourceapi.ResourceClaim, same bool) {
	for uid, b := range cs {
		n, ok := o[uid]
		if !ok {
			return nil, false
		}
		if n.rv == b.rv {
			continue
		}
		if b.key == "" {
			b.key = claimKey(b.claim)
		}
		if n.key = claimKey(n.claim); n.key != b.key {
			return nil, false
		}
		cs[uid] = n
	}
	for uid, n := range o {
		if _, ok := cs[uid]; !ok {
			added = append(added, n.claim)
		}
	}
	slices.SortFunc(added, func(a, b *resourceapi.ResourceClaim) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return added, true
}

// bookClaims books the GPU shares of allocated claims (allocatedClaims) on
// their nodes: each device as one share, saturating as a pod's booking
// does when it no longer fits. A claim on a node the snapshot does not
// hold, or one that cannot be read, is logged and left out. A MIG
// device books as the MIG instance it stands for (cat names its profile).
func (s *snapshot) bookClaims(log *slog.Logger, cat *catalog.Catalog, claims []*resourceapi.ResourceClaim) {
	for _, c := range claims {
		name := c.Namespace + "/" + c.Name
		node := ""
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == kdra.DriverName {
				node = r.Pool // Tessera's pools are its nodes (kdra.Resources)
				break
			}
		}
		ni, ok := s.byName[node]
		if !ok {
			continue
		}
		shares, err := kdra.Shares(c, &s.inv[ni], cat)
		if err != nil {
			log.Warn("allocated DRA claim cannot be read; its GPUs are not counted", "claim", name, "err", err)
			continue
		}
		hold := claimHold{pods: claimPods(c), exact: true}
		for _, sh := range shares {
			uuid := sh.UUID
			if sh.MIG != nil {
				uuid = sh.MIG.GPU
			}
			pos, ok := s.uuidPos[ni][uuid]
			if !ok {
				continue
			}
			p := placement.Pod{Name: "claim " + name, GPU: request.GPU{Count: 1, ComputeMilli: sh.ComputeMilli,
				ComputeLimitMilli: sh.ComputeLimitMilli, MemoryMiB: sh.MemoryMiB, MemoryLimitMiB: sh.MemoryLimitMiB}}
			d := placement.Decision{Node: ni, GPUs: []int{pos}}
			if sh.MIG != nil {
				// As a bound pod's MIG share books (snapshot.book).
				p.GPU = request.GPU{Count: 1, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MIGProfile: sh.MIGProfile}
				d.MIG = []placement.MIGChoice{s.migChoice(ni, pos, sh)}
			}
			hold.exact = s.apply(log, &p, d) && hold.exact
			hold.parts, hold.decisions = append(hold.parts, p), append(hold.decisions, d)
			hold.use.GPUMilli += sh.ComputeMilli
			hold.use.GPUMemoryMiB += sh.MemoryMiB
		}
		s.claims++
		s.claimHolds = append(s.claimHolds, hold)
	}
}

// claimHold is what an allocated claim takes of its GPUs, and the pods
// it is reserved for, in order: it is charged once, to the queue of the
// first of them booked on the snapshot (usage), as a pod's extended
// resources are charged to its queue. A claim shared by pods of several
// queues is charged to the first one's; a claim no booked pod holds (its
// pods gone, the claim not yet released) to none.
//
// A claim only one pod holds is also part of that pod's running workload
// (Scheduler.running): evicting the pod releases the claim (its template
// claim is deleted, or kube-controller-manager deallocates a claim no pod
// holds), so preemption and reclaim count its share as freed. A shared
// claim outlives any one of its pods and is no pod's.
type claimHold struct {
	pods      []types.UID
	use       queueing.Resources
	parts     []placement.Pod // its shares as booked, one per device
	decisions []placement.Decision
	exact     bool // booked within capacity (releasable)
}

// claimPods are the pods claim c is reserved for, in order.
func claimPods(c *resourceapi.ResourceClaim) []types.UID {
	var out []types.UID
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, r.UID)
		}
	}
	return out
}

// servesClaims reports whether the API server serves ResourceClaims of
// resource.k8s.io/v1 (Kubernetes 1.34 and later); where it does not, the
// scheduler books no claims.
func servesClaims(c kubernetes.Interface, log *slog.Logger) bool {
	ok, err := served(c, resourceapi.SchemeGroupVersion.WithResource("resourceclaims"))
	if err != nil {
		log.Warn("cannot tell whether the API server serves DRA ResourceClaims; their GPUs are not counted", "err", err)
	}
	return ok
}

// claimEvents pokes the loop when a claim is made (a pod may wait for
// it), or one of Tessera's driver is allocated, changes while allocated,
// or goes: the snapshot books it again.
func (s *Scheduler) claimEvents() cache.ResourceEventHandler {
	holds := func(obj any) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c, ok := obj.(*resourceapi.ResourceClaim)
		return !ok || holdsTesseraDevice(c)
	}
	return cache.ResourceEventHandlerFuncs{
		// Any new claim: a pod may wait for the claim of its template.
		AddFunc: func(any) { s.poke() },
		UpdateFunc: func(o, n any) {
			if holds(o) || holds(n) {
				s.inbox.clusterChanged() // a claim let go may make room
				s.poke()
			}
		},
		DeleteFunc: func(obj any) {
			if holds(obj) {
				s.inbox.clusterChanged()
				s.poke()
			}
		},
	}
}

// draEvents pokes the loop when ResourceSlices or DeviceClasses change: a
// node that publishes devices, or a class, may let a pod's claims fit.
func (s *Scheduler) draEvents() cache.ResourceEventHandler {
	changed := func() {
		s.inbox.clusterChanged()
		s.poke()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
}
