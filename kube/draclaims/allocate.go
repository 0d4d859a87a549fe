package draclaims

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/queueing"
)

// Allocate allocates the fresh claims of a pod placed on node (inv its
// GPUs) and returns what its binding writes, with the GPU compute and
// memory the claims it allocates take. shares(j) are the GPU shares the
// policy's decision for the pod's part j gives (the claims' parts from
// where AppendParts put them): their devices are the ones the structured
// allocator may give each claim (kdra.Allocate), whose selectors,
// classes, capacity policies and device taints the upstream code checks;
// other drivers' devices on the node are its choice. Claims already
// allocated are joined, and so is a claim an earlier pod of this cycle
// allocated when it is on this node.
//
// A Wait error says the claims cannot be allocated on this node (another
// pod's allocation of a claim went elsewhere, or the claims fit no device
// chosen): the pod waits; an Invalid error, that the allocator refuses a
// claim; any other error is the scheduler's (lists could not be read).
func (a *Allocator) Allocate(ctx context.Context, node *corev1.Node, inv *inventory.Node, pc *PodClaims, shares func(part int) []binding.Share, lists *Lists) ([]Write, queueing.Resources, error) {
	var use queueing.Resources
	var writes []Write
	for _, c := range pc.held {
		writes = append(writes, a.join(c))
	}
	chosen := map[types.UID][]string{}
	var fresh []*resourceapi.ResourceClaim
	k := pc.first
	for i, c := range pc.fresh {
		n := len(pc.reqs[i])
		if cur := a.view(c); cur.Status.Allocation != nil {
			// Allocated by a pod placed before this one in the cycle.
			if sel := cur.Status.Allocation.NodeSelector; sel != nil {
				if m, err := nodeaffinity.NewNodeSelector(sel); err != nil || !m.Match(node) {
					return nil, use, Wait(fmt.Sprintf("ResourceClaim %s was just allocated on another node for another pod; trying again", c.Name))
				}
			}
			writes = append(writes, a.join(c))
			k += n
			continue
		}
		chosen[c.UID] = []string{}
		for j := k; j < k+n; j++ {
			for _, sh := range shares(j) {
				chosen[c.UID] = append(chosen[c.UID], chosenDevice(sh))
				use.GPUMilli += sh.ComputeMilli
				use.GPUMemoryMiB += sh.MemoryMiB
			}
		}
		k += n
		fresh = append(fresh, c)
	}
	if len(fresh) == 0 {
		return writes, use, nil
	}
	all, sl, err := lists.get(a)
	if err != nil {
		return nil, use, err
	}
	state := kdra.NewAllocatedState(a.lay(all, false))
	res, err := kdra.Allocate(ctx, kdra.Pinned{Node: node, Inventory: inv, Claims: fresh, Chosen: chosen,
		Slices: sl, Classes: deviceClasses{a.cfg.Classes}, State: &state, Features: kdra.SchedulerFeatures(), CEL: a.cfg.CEL})
	switch {
	case errors.Is(err, kdra.ErrNoFit):
		return nil, use, Wait(fmt.Sprintf("node %s: %v", node.Name, err))
	case err != nil:
		return nil, use, Invalid{Err: err}
	}
	for i, c := range fresh {
		writes = append(writes, Write{claim: c, alloc: &res[i], written: make(chan struct{})})
	}
	return writes, use, nil
}

// Lists are the claims and slices the informers hold, listed once per
// cycle for every pod whose claims it allocates (the claims this cycle's
// pods allocated are laid over them as assumed). The zero value lists on
// first use; a nil one lists every time.
type Lists struct {
	done   bool
	claims []*resourceapi.ResourceClaim
	slices []*resourceapi.ResourceSlice
	err    error
}

func (l *Lists) get(a *Allocator) ([]*resourceapi.ResourceClaim, []*resourceapi.ResourceSlice, error) {
	if l == nil {
		l = &Lists{}
	}
	if !l.done {
		l.done = true
		if l.claims, l.err = a.cfg.Claims.List(labels.Everything()); l.err != nil {
			l.err = fmt.Errorf("list resource claims: %w", l.err)
		} else if l.slices, l.err = a.cfg.Slices.List(labels.Everything()); l.err != nil {
			l.err = fmt.Errorf("list resource slices: %w", l.err)
		}
	}
	return l.claims, l.slices, l.err
}

// chosenDevice is the DRA device of a share the policy chose: the GPU,
// or the MIG device of the instance's profile and start (kdra.MIGDevices).
// An existing instance whose start the node did not report has no such
// name: the GPU's is given, which the allocator refuses for a MIG claim
// (the pod then waits, saying so).
func chosenDevice(sh binding.Share) string {
	if sh.MIGProfile != "" && sh.MIG != nil && sh.MIG.Start >= 0 {
		return kdra.MIGDeviceName(sh.Index, sh.MIGProfile, sh.MIG.Start)
	}
	return kdra.DeviceName(sh.Index)
}

// deviceClasses is the structured allocator's view of the DeviceClass
// lister.
type deviceClasses struct {
	l resourcelisters.DeviceClassLister
}

func (d deviceClasses) List() ([]*resourceapi.DeviceClass, error) {
	return d.l.List(labels.Everything())
}
func (d deviceClasses) Get(name string) (*resourceapi.DeviceClass, error) { return d.l.Get(name) }
