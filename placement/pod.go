package placement

import "github.com/tessera-gpu/tessera/request"

// Pod is what one placement asks for: host CPU and memory for the whole pod
// plus a GPU request (per GPU). A zero GPU request is a CPU-only pod.
type Pod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPU       request.GPU
	// Slot: it takes one of its node's pod slots (Node.Pods). A front door
	// sets it on a pod's first part, which carries the host requests; a
	// pod's further parts take none.
	Slot bool
	// Prefer, when set, rates the nodes of the cluster a decision is made
	// on (by index; higher is preferred) for the pod's soft constraints
	// (preferred affinity, soft spread): among the nodes the policy scores
	// exactly alike, the one it rates highest wins, before the fixed tie
	// order. It is asked once per decision, so it sees what was placed
	// before. Such a pod is decided node by node (never by class), and a
	// MIG request ignores it.
	Prefer func(c *Cluster) ([]int64, error)
	// OpensCordoned: a node closed only as cordoned (ClosedCordoned) may
	// take the pod (it tolerates the cordon). Such a pod is decided node
	// by node (never by class).
	OpensCordoned bool
}

// GPUCount is the number of GPUs the pod needs (0 for CPU-only pods).
func (p *Pod) GPUCount() int { return p.GPU.Count }

// MilliPerGPU is the compute share taken on each chosen GPU; an exclusive
// request takes whole GPUs whatever its compute share.
func (p *Pod) MilliPerGPU() int64 {
	if p.GPU.Count == 0 {
		return 0
	}
	if p.GPU.Exclusive {
		return request.Whole
	}
	return p.GPU.ComputeMilli
}

// milliOn is the compute share the pod takes on g: MilliPerGPU, except
// for a memory-only share (no compute given), whose compute follows its
// memory on that GPU.
func (p *Pod) milliOn(g *GPU) int64 {
	m := p.MilliPerGPU()
	if m == 0 && p.GPU.Count > 0 && p.GPU.MemoryMiB > 0 && g.MemoryMiB > 0 {
		m, _ = p.GPU.ResolveCompute(g.MemoryMiB)
	}
	return m
}

// Sharing reports whether the pod takes a fraction of one GPU.
func (p *Pod) Sharing() bool { return p.GPU.Count == 1 && p.MilliPerGPU() < request.Whole && !p.MIG() }

// TotalGPUMilli is the GPU compute the pod takes in all.
func (p *Pod) TotalGPUMilli() int64 { return int64(p.GPU.Count) * p.MilliPerGPU() }

// memoryOn is the GPU memory the pod takes on g (0 when g's memory is not tracked).
func (p *Pod) memoryOn(g *GPU) int64 {
	if g.MemoryMiB == 0 {
		return 0
	}
	if p.GPU.Exclusive {
		return g.MemoryMiB
	}
	m, _ := p.GPU.ResolveMemory(g.MemoryMiB)
	return m
}

// shape is the pod's GPU affinity class: all sharing pods form one class
// (Milli 0), whole-GPU pods one class per GPU count.
func (p *Pod) shape() GPUShape {
	if p.MIG() {
		return GPUShape{Count: p.GPUCount(), Milli: -1} // MIG pods: one class per count
	}
	if p.Sharing() {
		return GPUShape{Count: 1}
	}
	return GPUShape{Count: p.GPUCount(), Milli: p.MilliPerGPU()}
}
