package boundpods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
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

// HostRequests is the pod's CPU (milli) and memory (MiB) requests as
// kube-scheduler counts them (containers, init containers, overhead).
func HostRequests(p *corev1.Pod) (cpuMilli, memMiB int64) {
	reqs := resource.PodRequests(p, resource.PodResourcesOptions{})
	if q, ok := reqs[corev1.ResourceCPU]; ok {
		cpuMilli = q.MilliValue()
	}
	if q, ok := reqs[corev1.ResourceMemory]; ok {
		memMiB = (q.Value() + (1 << 20) - 1) >> 20
	}
	return cpuMilli, memMiB
}

// Hold is what a bound (or assumed) pod holds, as booked: its host
// requests, one of its node's pod slots and the GPU shares its assignment grants (a malformed
// assignment books none: the error says why), under its HoldKey. Queue,
// gang and whether it may be preempted are the scheduler's to add.
func Hold(p *corev1.Pod) (booked.Hold, error) {
	cpu, mem := HostRequests(p)
	h := booked.Hold{ID: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, CPUMilli: cpu, MemoryMiB: mem, Slot: true, Key: holdKey(p, cpu, mem)}
	if p.Spec.Priority != nil {
		h.Priority = *p.Spec.Priority
	}
	if p.Status.StartTime != nil {
		h.Started = p.Status.StartTime.Time
	}
	a, err := Assignment(p)
	if a != nil {
		for _, c := range a.Containers {
			h.Groups = append(h.Groups, c.GPUs)
		}
	}
	return h, err
}

// HoldKey is what a pod's hold is made of (Hold reads no more of the pod
// for what it books): a pod whose key is unchanged keeps its booking.
func HoldKey(p *corev1.Pod) string {
	cpu, mem := HostRequests(p)
	return holdKey(p, cpu, mem)
}

func holdKey(p *corev1.Pod, cpu, mem int64) string {
	return fmt.Sprintf("%s %d %d %s", p.Spec.NodeName, cpu, mem, p.Annotations[binding.AnnotationKey])
}
