package placement

import (
	"fmt"
	"slices"

	"github.com/tessera-gpu/tessera/request"
)

// okGPUs: the node has enough GPUs that each fit one GPU's worth of the
// request: a fractional share on one GPU, or whole free GPUs, of an
// allowed model.
func okGPUs(n *Node, p *Pod) bool {
	want := p.GPUCount()
	if want == 0 || p.MIG() { // MIG requests: okMIG
		return true
	}
	if len(n.GPUs) < want {
		return false
	}
	have := 0
	for i := range n.GPUs {
		if gpuOK(p, &n.GPUs[i]) {
			if have++; have == want {
				return true
			}
		}
	}
	return false
}

func whyGPUs(n *Node, p *Pod) string {
	want := p.GPUCount()
	if len(n.GPUs) < want {
		return fmt.Sprintf("node has %d GPUs, %d requested", len(n.GPUs), want)
	}
	allowed, inMIG := 0, 0
	for i := range n.GPUs {
		if modelAllowed(p, n.GPUs[i].Model) {
			allowed++
			if n.GPUs[i].MIG != nil {
				inMIG++
			}
		}
	}
	switch {
	case allowed == 0:
		return fmt.Sprintf("no GPU of an allowed model (%v)", p.GPU.Models)
	case allowed-inMIG < want:
		return fmt.Sprintf("%d of the node's GPUs of an allowed model are in MIG mode and take MIG requests only; %d GPUs requested", inMIG, want)
	case p.Sharing():
		return fmt.Sprintf("no GPU has %dm compute (and the memory) free", p.MilliPerGPU())
	}
	return fmt.Sprintf("fewer than %d whole GPUs free", want)
}

// modelAllowed reports whether the request accepts a GPU of this model.
func modelAllowed(p *Pod, model string) bool {
	return len(p.GPU.Models) == 0 || slices.Contains(p.GPU.Models, model)
}

// gpuOK reports whether one GPU can take one GPU's worth of p.
func gpuOK(p *Pod, g *GPU) bool {
	milli := p.milliOn(g)
	if g.FreeMilli < milli || (milli >= request.Whole && g.FreeMilli < request.Whole) {
		return false
	}
	if !modelAllowed(p, g.Model) || g.MIG != nil {
		return false
	}
	return g.MemoryMiB == 0 || p.memoryOn(g) <= g.FreeMemoryMiB
}

// gpuFits says why one GPU cannot take one GPU's worth of p, or "".
func gpuFits(p *Pod, g *GPU) string {
	if gpuOK(p, g) {
		return ""
	}
	if !modelAllowed(p, g.Model) {
		return fmt.Sprintf("model %s not allowed", g.Model)
	}
	if g.MIG != nil {
		return "in MIG mode: MIG requests only"
	}
	if g.FreeMilli < p.milliOn(g) {
		return fmt.Sprintf("%dm free, %dm requested", g.FreeMilli, p.milliOn(g))
	}
	return fmt.Sprintf("%d MiB GPU memory free, %d MiB requested", g.FreeMemoryMiB, p.memoryOn(g))
}
