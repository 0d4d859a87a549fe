package draclaims

import (
	"encoding/json"
	"fmt"
	"log/slog"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/crdwatch"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// Allocated DRA claims of Tessera's driver hold GPU shares as bound pods'
// assignments do: a node may run the device plugin's pods and the DRA
// driver's claims side by side (or claims allocated by kube-scheduler next
// to pods the scheduler binds), and the core's books hold both, so no GPU
// share is handed out twice. A claim is booked once, however many pods
// name it (a shared claim), for as long as it is allocated, as a hold of
// no pod of its own (booked.Hold.For: the pods it is reserved for): it is
// charged to the first of them booked, and one pod alone holds runs with
// that pod (evicting the pod releases the claim: its template claim is
// deleted, or kube-controller-manager deallocates a claim no pod holds).
// Its pods' own CPU and memory are booked with the pods.

// Booking keeps the allocated claims of Tessera's driver booked on the
// core's books.
type Booking struct {
	books  *booked.Cluster
	cat    *catalog.Catalog
	log    *slog.Logger
	claims map[types.UID]bookedClaim
}

// bookedClaim is what was booked of a claim: the resourceVersion read and
// what it books (claimKey).
type bookedClaim struct {
	id, rv, key string
}

// NewBooking books claims on b (empty of claims); cat names MIG devices'
// profiles.
func NewBooking(b *booked.Cluster, cat *catalog.Catalog, log *slog.Logger) *Booking {
	return &Booking{books: b, cat: cat, log: log, claims: map[types.UID]bookedClaim{}}
}

// Len is how many claims are booked.
func (k *Booking) Len() int { return len(k.claims) }

// Sync books the allocated claims of Tessera's driver that are new or
// book something else now, and releases those gone. A claim on a node the
// books do not hold, or one that cannot be read, is logged and left out
// (and read again next time).
func (k *Booking) Sync(claims []*resourceapi.ResourceClaim) {
	seen := make(map[types.UID]bool, len(k.claims))
	for _, c := range claims {
		if !HoldsTesseraDevice(c) {
			continue
		}
		seen[c.UID] = true
		b, ok := k.claims[c.UID]
		if ok && b.rv == c.ResourceVersion {
			continue
		}
		key := claimKey(c)
		if ok && b.key == key {
			k.claims[c.UID] = bookedClaim{id: b.id, rv: c.ResourceVersion, key: key}
			continue
		}
		h, err := k.hold(c)
		if err != nil {
			k.log.Warn("allocated DRA claim cannot be read; its GPUs are not counted", "claim", c.Namespace+"/"+c.Name, "err", err)
			if ok {
				k.books.Release(b.id)
				delete(k.claims, c.UID)
			}
			continue
		}
		if err := k.books.Book(h); err != nil {
			k.log.Warn("booking an allocated DRA claim over capacity", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
		k.claims[c.UID] = bookedClaim{id: h.ID, rv: c.ResourceVersion, key: key}
	}
	for uid, b := range k.claims {
		if !seen[uid] {
			k.books.Release(b.id)
			delete(k.claims, uid)
		}
	}
}

// claimKey is what is booked of c: its allocation (devices, consumed
// capacity, configuration: the shares and their limits) and the pods it
// is reserved for (whose queue it is charged to), as JSON.
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

// HoldsTesseraDevice reports whether c is allocated a device of
// Tessera's DRA driver.
func HoldsTesseraDevice(c *resourceapi.ResourceClaim) bool {
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

// hold is what an allocated claim holds: each device as one share (a MIG
// device books as the MIG instance it stands for: the catalog names its
// profile), for the pods it is reserved for.
func (k *Booking) hold(c *resourceapi.ResourceClaim) (booked.Hold, error) {
	node := ""
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == kdra.DriverName {
			node = r.Pool // Tessera's pools are its nodes (kdra.Resources)
			break
		}
	}
	ni, ok := k.books.Index(node)
	if !ok {
		return booked.Hold{}, fmt.Errorf("node %q is not among the nodes scheduled on", node)
	}
	shares, err := kdra.Shares(c, k.books.Inventory(ni), k.cat)
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

// Served reports whether the API server serves ResourceClaims of
// resource.k8s.io/v1 (Kubernetes 1.34 and later); where it does not, the
// scheduler books no claims.
func Served(c kubernetes.Interface, log *slog.Logger) bool {
	ok, err := crdwatch.Served(c, resourceapi.SchemeGroupVersion.WithResource("resourceclaims"))
	if err != nil {
		log.Warn("cannot tell whether the API server serves DRA ResourceClaims; their GPUs are not counted", "err", err)
	}
	return ok
}
