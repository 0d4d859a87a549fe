package placement

import (
	"fmt"

	"github.com/tessera-gpu/tessera/request"
)

// Unit names a feasibility check, in the order the checks run.
type Unit int

// Feasibility units.
const (
	// UnitOpen is whether the node takes new work at all (Node.Closed).
	UnitOpen Unit = iota + 1
	// UnitMIG is a MIG request's GPUs: GPUs in MIG mode of an allowed model
	// with a free instance of the profile or a free start slot for one.
	UnitMIG
	// UnitCPU is the node's free CPU.
	UnitCPU
	// UnitMemory is the node's free host memory.
	UnitMemory
	// UnitPods is the node's free pod slots (Node.Pods).
	UnitPods
	// UnitGPUs is the node's GPUs: count, model and free compute and memory.
	UnitGPUs
)

// Rejection is why a node cannot take a pod: the unit that failed, the
// engine's sentence, and for the GPU unit the figures behind it, so an
// adapter can say it in its own words. It changes no decision: Feasible
// and the policies decide exactly as before; a rejection only explains.
type Rejection struct {
	// Node is the node's name.
	Node string
	// Unit is the first check that failed.
	Unit Unit
	// Reason is the engine's sentence ("fewer than 2 whole GPUs free").
	Reason string
	// GPUs are the GPU unit's figures (zero unless Unit is UnitGPUs).
	GPUs GPUFigures
}

// GPUFigures count a node's GPUs against one pod's GPU request, in the
// order the GPU unit checks them: model, then compute, then memory.
type GPUFigures struct {
	// Want is the number of GPUs the pod needs.
	Want int
	// Have is the number of GPUs of the node.
	Have int
	// Allowed counts the GPUs of a model the pod allows.
	Allowed int
	// ShortCompute counts the allowed GPUs without the pod's compute free
	// (a whole GPU for a whole-GPU request).
	ShortCompute int
	// ShortMemory counts the allowed GPUs with the compute free but not
	// the pod's GPU memory.
	ShortMemory int
	// InMIGMode counts the allowed GPUs in MIG mode, which take MIG
	// requests only (counted before compute and memory).
	InMIGMode int
}

// Usable is the number of GPUs that could each take one GPU's worth of
// the pod.
func (f GPUFigures) Usable() int { return f.Allowed - f.InMIGMode - f.ShortCompute - f.ShortMemory }

// Explain reports whether node n can take pod p and, when it cannot, why.
func Explain(n *Node, p *Pod) (Rejection, bool) {
	for i, u := range units() {
		if u.ok(n, p) {
			continue
		}
		r := Rejection{Node: n.Name, Unit: Unit(i + 1), Reason: u.why(n, p)}
		if r.Unit == UnitGPUs {
			r.GPUs = gpuFigures(n, p)
		}
		return r, false
	}
	return Rejection{}, true
}

func gpuFigures(n *Node, p *Pod) GPUFigures {
	f := GPUFigures{Want: p.GPUCount(), Have: len(n.GPUs)}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !modelAllowed(p, g.Model) {
			continue
		}
		f.Allowed++
		milli := p.milliOn(g)
		switch {
		case g.MIG != nil:
			f.InMIGMode++
		case g.FreeMilli < milli || (milli >= request.Whole && g.FreeMilli < request.Whole):
			f.ShortCompute++
		case g.MemoryMiB != 0 && p.memoryOn(g) > g.FreeMemoryMiB:
			f.ShortMemory++
		}
	}
	return f
}

// NoFitError is the error of a policy that found no node for a pod. It
// wraps ErrNoFit and carries the first node's rejection (every node
// rejected the pod, the first one included).
type NoFitError struct {
	// Pod is the pod's name.
	Pod string
	// First is the first node's rejection; zero when the cluster has no
	// nodes.
	First Rejection
}

func (e *NoFitError) Error() string {
	reason := "cluster has no nodes"
	if e.First.Node != "" || e.First.Unit != 0 {
		reason = e.First.Node + ": " + e.First.Reason
	}
	return fmt.Sprintf("pod %s: %v (first rejection: %s)", e.Pod, ErrNoFit, reason)
}

// Unwrap makes errors.Is(err, ErrNoFit) hold.
func (e *NoFitError) Unwrap() error { return ErrNoFit }
