package placement

import (
	"errors"
	"fmt"

	"github.com/tessera-gpu/tessera/request"
)

// ErrNoFit is returned (wrapped) by policies when no node can take the pod.
var ErrNoFit = errors.New("no feasible node")

// Decision is where a pod goes: a node and the positions (in Node.GPUs) of
// the GPUs it takes. GPUs is empty for CPU-only pods.
type Decision struct {
	Node int
	GPUs []int
	// MIG, for a MIG request, says where each instance lies on the GPU at
	// the same position of GPUs (an existing instance, or one to create at
	// a start slot); nil otherwise.
	MIG []MIGChoice
}

// Apply books the pod on the snapshot as decided. It checks every
// invariant first and changes nothing when one fails. A change is
// recorded in the cluster's change log (changelog.go).
func (c *Cluster) Apply(p *Pod, d Decision) error {
	if err := c.apply(p, d); err != nil {
		return err
	}
	c.record(d.Node)
	return nil
}

// apply is Apply without the record.
func (c *Cluster) apply(p *Pod, d Decision) error {
	n, err := c.checkDecision(p, d)
	if err != nil {
		return fmt.Errorf("apply pod %s: %w", p.Name, err)
	}
	if n.CPUMilli > 0 && n.FreeCPUMilli < p.CPUMilli {
		return fmt.Errorf("apply pod %s: node %s has %dm CPU free, pod needs %dm", p.Name, n.Name, n.FreeCPUMilli, p.CPUMilli)
	}
	if n.MemoryMiB > 0 && n.FreeMemoryMiB < p.MemoryMiB {
		return fmt.Errorf("apply pod %s: node %s has %d MiB free, pod needs %d MiB", p.Name, n.Name, n.FreeMemoryMiB, p.MemoryMiB)
	}
	if !okPods(n, p) {
		return fmt.Errorf("apply pod %s: node %s has no pod slot free (pod limit %d)", p.Name, n.Name, n.Pods)
	}
	if p.MIG() {
		if err := applyMIG(n, p, d, false); err != nil {
			return fmt.Errorf("apply pod %s: %w", p.Name, err)
		}
		n.book(p, false)
		return nil
	}
	if len(d.MIG) > 0 {
		return fmt.Errorf("apply pod %s: decision names MIG instances for a request without a MIG profile", p.Name)
	}
	for _, gi := range d.GPUs {
		if reason := gpuFits(p, &n.GPUs[gi]); reason != "" {
			return fmt.Errorf("apply pod %s: node %s GPU %d: %s", p.Name, n.Name, n.GPUs[gi].Index, reason)
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli -= p.CPUMilli
	}
	if n.MemoryMiB > 0 {
		n.FreeMemoryMiB -= p.MemoryMiB
	}
	n.FreePods -= n.slot(p)
	for _, gi := range d.GPUs {
		g := &n.GPUs[gi]
		g.FreeMilli -= p.milliOn(g)
		g.FreeMemoryMiB -= p.memoryOn(g)
	}
	if p.GPUCount() > 0 {
		if n.Shapes == nil {
			n.Shapes = map[GPUShape]int{}
		}
		n.Shapes[p.shape()]++
	}
	return nil
}

// book takes (or, with release, gives back) the pod's host CPU and
// memory, its pod slot and its shape count; Apply and Release check the
// amounts first.
func (n *Node) book(p *Pod, release bool) {
	sign := int64(1)
	if release {
		sign = -1
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli -= sign * p.CPUMilli
	}
	if n.MemoryMiB > 0 {
		n.FreeMemoryMiB -= sign * p.MemoryMiB
	}
	n.FreePods -= sign * n.slot(p)
	if p.GPUCount() == 0 {
		return
	}
	if !release {
		if n.Shapes == nil {
			n.Shapes = map[GPUShape]int{}
		}
		n.Shapes[p.shape()]++
		return
	}
	if n.Shapes[p.shape()] > 0 {
		if n.Shapes[p.shape()]--; n.Shapes[p.shape()] == 0 {
			delete(n.Shapes, p.shape())
		}
	}
}

// Release gives back what Apply booked for the same pod and decision,
// recording the change as Apply does.
func (c *Cluster) Release(p *Pod, d Decision) error {
	if err := c.release(p, d); err != nil {
		return err
	}
	c.record(d.Node)
	return nil
}

// release is Release without the record.
func (c *Cluster) release(p *Pod, d Decision) error {
	n, err := c.checkDecision(p, d)
	if err != nil {
		return fmt.Errorf("release pod %s: %w", p.Name, err)
	}
	if n.CPUMilli > 0 && n.FreeCPUMilli+p.CPUMilli > n.CPUMilli {
		return fmt.Errorf("release pod %s: node %s would have more CPU free than its capacity", p.Name, n.Name)
	}
	if n.MemoryMiB > 0 && n.FreeMemoryMiB+p.MemoryMiB > n.MemoryMiB {
		return fmt.Errorf("release pod %s: node %s would have more memory free than its capacity", p.Name, n.Name)
	}
	if n.FreePods+n.slot(p) > n.Pods {
		return fmt.Errorf("release pod %s: node %s would have more pod slots free than its limit %d", p.Name, n.Name, n.Pods)
	}
	if p.MIG() {
		if err := applyMIG(n, p, d, true); err != nil {
			return fmt.Errorf("release pod %s: %w", p.Name, err)
		}
		n.book(p, true)
		return nil
	}
	for _, gi := range d.GPUs {
		g := &n.GPUs[gi]
		if g.FreeMilli+p.milliOn(g) > request.Whole || g.FreeMemoryMiB+p.memoryOn(g) > g.MemoryMiB {
			return fmt.Errorf("release pod %s: node %s GPU %d would have more free than its capacity", p.Name, n.Name, g.Index)
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli += p.CPUMilli
	}
	if n.MemoryMiB > 0 {
		n.FreeMemoryMiB += p.MemoryMiB
	}
	n.FreePods += n.slot(p)
	for _, gi := range d.GPUs {
		g := &n.GPUs[gi]
		g.FreeMilli += p.milliOn(g)
		g.FreeMemoryMiB += p.memoryOn(g)
	}
	if p.GPUCount() > 0 && n.Shapes[p.shape()] > 0 {
		if n.Shapes[p.shape()]--; n.Shapes[p.shape()] == 0 {
			delete(n.Shapes, p.shape())
		}
	}
	return nil
}

// slot is the pod slots p takes on n: one for a part with Slot on a node
// with a pod limit, else none (as untracked CPU is never booked).
func (n *Node) slot(p *Pod) int64 {
	if p.Slot && n.Pods > 0 {
		return 1
	}
	return 0
}

func (c *Cluster) checkDecision(p *Pod, d Decision) (*Node, error) {
	if d.Node < 0 || d.Node >= len(c.Nodes) {
		return nil, fmt.Errorf("node index %d out of range [0, %d)", d.Node, len(c.Nodes))
	}
	n := &c.Nodes[d.Node]
	if len(d.GPUs) != p.GPUCount() {
		return nil, fmt.Errorf("decision names %d GPUs, pod asks for %d", len(d.GPUs), p.GPUCount())
	}
	seen := make(map[int]bool, len(d.GPUs))
	for _, gi := range d.GPUs {
		if gi < 0 || gi >= len(n.GPUs) {
			return nil, fmt.Errorf("node %s: GPU position %d out of range [0, %d)", n.Name, gi, len(n.GPUs))
		}
		if seen[gi] {
			return nil, fmt.Errorf("node %s: GPU position %d named twice", n.Name, gi)
		}
		seen[gi] = true
	}
	return n, nil
}
