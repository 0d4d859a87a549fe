package placement

import (
	"fmt"
	"slices"
	"strings"
)

// okMIG: a MIG request needs Count GPUs in MIG mode that can each take an
// instance of its profile; other requests pass.
func okMIG(n *Node, p *Pod) bool {
	if !p.MIG() {
		return true
	}
	have := 0
	for i := range n.GPUs {
		if migGPUOK(p, &n.GPUs[i]) {
			if have++; have == p.GPUCount() {
				return true
			}
		}
	}
	return false
}

// whyMIG explains okMIG's refusal, naming the profile, the models and
// the profiles they have.
func whyMIG(n *Node, p *Pod) string {
	prof := p.GPU.MIGProfile
	var migGPUs, allowed, offering int
	var models, offered []string
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.MIG == nil {
			continue
		}
		migGPUs++
		if !modelAllowed(p, g.Model) {
			continue
		}
		allowed++
		if g.MIG.Spec == nil || g.MIG.Spec.ProfileIndex(prof) >= 0 || g.MIG.freeInstance(prof) >= 0 {
			offering++
			continue
		}
		if !slices.Contains(models, g.Model) {
			models = append(models, g.Model)
			offered = append(offered, fmt.Sprintf("%s has %s", g.Model, strings.Join(g.MIG.Spec.ProfileNames(), ", ")))
		}
	}
	switch {
	case migGPUs == 0:
		return fmt.Sprintf("MIG profile %s requested: the node has no GPU in MIG mode", prof)
	case allowed == 0:
		return fmt.Sprintf("MIG profile %s requested: no GPU in MIG mode of an allowed model (%v)", prof, p.GPU.Models)
	case offering == 0:
		return fmt.Sprintf("MIG profile %s is not a profile of %s (%s)", prof, strings.Join(models, ", "), strings.Join(offered, "; "))
	}
	return fmt.Sprintf("MIG profile %s: fewer than %d GPUs in MIG mode with a free %s instance or a free start slot to create one (%s)",
		prof, p.GPUCount(), prof, migLayouts(n, p))
}
