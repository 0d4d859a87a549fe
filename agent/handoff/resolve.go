package handoff

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
)

// Resolve finds the container a kubelet Allocate call is for.
//
// pods are the pods bound to node (from the API server); done reports the
// containers that already hold devices (kubelet's PodResources report and
// the agent's checkpoint); admitting, when kubelet's PodResources API is
// reachable, is the set of pods kubelet lists as active — kubelet admits one
// pod at a time and lists it before allocating its devices, so a pod bound
// but not yet listed is not the one being allocated. deviceIDs are the
// devices kubelet chose.
//
// A pod is a candidate when its first container (in kubelet's allocation
// order) without devices asks for len(deviceIDs) devices. One candidate is
// the answer. Several are narrowed to those whose assigned GPUs are the GPUs
// the device IDs sit on; if what remains would all get the same shares the
// oldest is chosen and marked Ambiguous, otherwise the call fails rather
// than guess. A chosen pod with a missing or malformed assignment fails with
// an error naming the pod and the problem.
func Resolve(node string, pods []Pod, done func(Allocated) bool, admitting map[PodRef]bool, deviceIDs []string) (Choice, error) {
	n := len(deviceIDs)
	var cands []Choice
	for _, p := range sortedPods(pods) {
		if p.Terminal || (admitting != nil && !admitting[p.Ref()]) {
			continue
		}
		c, ok := nextContainer(p, done)
		if !ok || c.Devices != n {
			continue
		}
		cands = append(cands, Choice{Pod: p, Container: c.Name})
	}
	switch len(cands) {
	case 0:
		return Choice{}, fmt.Errorf("no pod bound to node %s is waiting for %d Tessera device(s); has the scheduler bound it here?", node, n)
	case 1:
		return withShares(node, cands[0], n)
	}
	return narrow(node, cands, deviceIDs)
}

// narrow picks among several candidates, or fails when they differ.
func narrow(node string, cands []Choice, deviceIDs []string) (Choice, error) {
	var valid []Choice
	for _, c := range cands {
		if v, err := withShares(node, c, len(deviceIDs)); err == nil {
			valid = append(valid, v)
		}
	}
	if units, err := UnitsOf(deviceIDs); err == nil {
		var onUnits []Choice
		for _, c := range valid {
			if sameUnits(c.GPUs, units) {
				onUnits = append(onUnits, c)
			}
		}
		if len(onUnits) > 0 {
			valid = onUnits
		}
	}
	if len(valid) == 0 {
		return Choice{}, fmt.Errorf("%d pods wait for %d Tessera device(s) on node %s and none has a usable assignment: %s", len(cands), len(deviceIDs), node, names(cands))
	}
	for _, c := range valid[1:] {
		if !SameShares(c.GPUs, valid[0].GPUs) {
			return Choice{}, fmt.Errorf("cannot tell which of %s kubelet is allocating: they wait for %d Tessera device(s) on node %s with different shares", names(valid), len(deviceIDs), node)
		}
	}
	chosen := valid[0]
	chosen.Ambiguous = len(valid) > 1
	return chosen, nil
}

// withShares decodes the candidate's assignment and checks it fits the call.
func withShares(node string, c Choice, n int) (Choice, error) {
	where := fmt.Sprintf("pod %s container %s", c.Pod.Ref(), c.Container)
	if !c.Pod.HasAssignment {
		return Choice{}, fmt.Errorf("%s: annotation %s is missing; only the Tessera scheduler may place pods that request Tessera devices", where, binding.AnnotationKey)
	}
	a, err := binding.Decode(c.Pod.Assignment)
	if err != nil {
		return Choice{}, fmt.Errorf("%s: annotation %s: %w", where, binding.AnnotationKey, err)
	}
	if a.Node != node {
		return Choice{}, fmt.Errorf("%s: annotation %s: assignment.node is %q, but this is node %q", where, binding.AnnotationKey, a.Node, node)
	}
	ac, ok := a.Container(c.Container)
	if !ok {
		return Choice{}, fmt.Errorf("%s: annotation %s lists no container %q", where, binding.AnnotationKey, c.Container)
	}
	if len(ac.GPUs) != n {
		return Choice{}, fmt.Errorf("%s: annotation %s gives it %d GPU(s), but it requests %d Tessera device(s)", where, binding.AnnotationKey, len(ac.GPUs), n)
	}
	c.GPUs = ac.GPUs
	return c, nil
}

// nextContainer is the pod's first container that holds no devices yet.
func nextContainer(p Pod, done func(Allocated) bool) (ContainerRequest, bool) {
	for _, c := range p.Containers {
		if c.Devices > 0 && !done(Allocated{Pod: p.Ref(), PodUID: p.UID, Container: c.Name}) {
			return c, true
		}
	}
	return ContainerRequest{}, false
}

// sortedPods orders pods as kubelet admits a batch: oldest first.
func sortedPods(pods []Pod) []Pod {
	out := append([]Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// SameShares reports whether two share lists would hand a container the
// same environment.
func SameShares(a, b []binding.Share) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Index, y.Index = 0, 0
		if x != y {
			return false
		}
	}
	return true
}

func sameUnits(gpus []binding.Share, units []string) bool {
	got := make([]string, 0, len(gpus))
	for _, g := range gpus {
		got = append(got, g.UUID)
	}
	sort.Strings(got)
	return strings.Join(got, ",") == strings.Join(units, ",")
}

func names(cs []Choice) string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Pod.Ref().String()+"["+c.Container+"]")
	}
	return strings.Join(out, ", ")
}

// Guess returns the GPUs of the oldest pod waiting for size devices, for
// GetPreferredAllocation: kubelet holds its device lock during that call,
// so the agent cannot ask kubelet which pod it is admitting and steers
// kubelet towards the pod it most likely admits (kubelet admits a batch
// oldest first). A wrong guess only costs the device IDs their meaning;
// Allocate decides the shares on its own.
func Guess(node string, pods []Pod, done func(Allocated) bool, size int) ([]string, bool) {
	for _, p := range sortedPods(pods) {
		if p.Terminal {
			continue
		}
		c, ok := nextContainer(p, done)
		if !ok || c.Devices != size {
			continue
		}
		ch, err := withShares(node, Choice{Pod: p, Container: c.Name}, size)
		if err != nil {
			continue
		}
		units := make([]string, len(ch.GPUs))
		for i, g := range ch.GPUs {
			units[i] = g.UUID
		}
		return units, true
	}
	return nil, false
}

// Shares returns what the pod's assignment gives one of its containers.
func Shares(node string, p Pod, container string) ([]binding.Share, error) {
	for _, c := range p.Containers {
		if c.Name == container {
			ch, err := withShares(node, Choice{Pod: p, Container: container}, c.Devices)
			return ch.GPUs, err
		}
	}
	return nil, fmt.Errorf("pod %s has no container %q that requests Tessera devices", p.Ref(), container)
}
