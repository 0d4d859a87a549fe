package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/kube/draclaims"
)

// inbox carries what informer handlers and binding workers report to the
// scheduling loop, which alone steps the core (package dispatch) and the
// assumed pods: the core is not safe for concurrent use, and a report
// must not be lost while a cycle runs (it is taken in at the next one, as
// kube-scheduler's queue remembers move requests made during a cycle).
// It holds no decision of its own.
type inbox struct {
	mu sync.Mutex
	// changed: the cluster changed in a way that may make room.
	changed bool
	// respecified are pods whose own spec, labels or annotations changed.
	respecified []string
	// binds are the outcomes of bindings, in the order they ended, and
	// claims what their claim writes did (taken in before binds).
	binds  []bindReport
	claims []claimReport
}

// claimReport is what one binding's claim writes did: one claim written;
// or, with forget, failed, so what pod's binding assumed (ws) is given
// back.
type claimReport struct {
	written draclaims.Written
	forget  bool
	pod     *corev1.Pod
	ws      []draclaims.Write
}

// bindReport is how one binding ended.
type bindReport struct {
	id  string
	uid types.UID
	// bound is the pod as the API server holds it bound (the answer to
	// the binding was lost, or it succeeded: nil then); ok says bound.
	ok    bool
	bound *corev1.Pod
	err   error
}

func (b *inbox) clusterChanged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changed = true
}

func (b *inbox) podRespecified(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.respecified = append(b.respecified, id)
}

func (b *inbox) bindEnded(r bindReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.binds = append(b.binds, r)
}

func (b *inbox) claimsDone(r claimReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims = append(b.claims, r)
}

// take returns and clears what was reported.
func (b *inbox) take() (changed bool, respecified []string, binds []bindReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	changed, respecified, binds = b.changed, b.respecified, b.binds
	b.changed, b.respecified, b.binds = false, nil, nil
	return changed, respecified, binds
}

// takeClaims returns and clears the claim reports.
func (b *inbox) takeClaims() []claimReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.claims
	b.claims = nil
	return out
}
