package boundpods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/binding"
)

// Occupies reports whether a pod holds node resources: bound and not finished.
func Occupies(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Assignment decodes the pod's assignment annotation; nil when absent.
func Assignment(p *corev1.Pod) (*binding.Assignment, error) {
	v, ok := p.Annotations[binding.AnnotationKey]
	if !ok {
		return nil, nil
	}
	a, err := binding.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", binding.AnnotationKey, err)
	}
	return &a, nil
}

// Held is what the pods bound to one node hold of one GPU.
type Held struct {
	// ComputeMilli is the guaranteed compute granted, in thousandths of the
	// GPU (a sum over pods: above 1000 when the bookings are inconsistent).
	ComputeMilli int64
	// MemoryMiB is the guaranteed memory granted.
	MemoryMiB int64
	// Pods counts the pods holding a share of it.
	Pods int
}

// Holdings sums, per node and GPU UUID, what the occupying pods among pods
// hold: the shares of their assignments, counted on the node the pod is
// bound to (spec.nodeName), as the scheduler books them. Pods that do not
// occupy a node or carry no assignment hold no GPU. A pod whose assignment
// is malformed holds none either and is reported in the returned errors
// (one per pod, naming it); the others are still counted.
func Holdings(pods []*corev1.Pod) (map[string]map[string]Held, []error) {
	out := map[string]map[string]Held{}
	var errs []error
	for _, p := range pods {
		if !Occupies(p) {
			continue
		}
		a, err := Assignment(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		if a == nil {
			continue
		}
		node := out[p.Spec.NodeName]
		if node == nil {
			node = map[string]Held{}
			out[p.Spec.NodeName] = node
		}
		seen := map[string]bool{}
		for _, c := range a.Containers {
			for _, g := range c.GPUs {
				h := node[g.UUID]
				h.ComputeMilli += g.ComputeMilli
				h.MemoryMiB += g.MemoryMiB
				if !seen[g.UUID] {
					h.Pods++
					seen[g.UUID] = true
				}
				node[g.UUID] = h
			}
		}
	}
	return out, errs
}
