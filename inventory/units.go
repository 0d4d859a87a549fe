package inventory

// Unit is one device a node hands out to workloads: a MIG instance of a GPU
// in MIG mode, or a whole GPU (also a GPU in MIG mode with no instances).
type Unit struct {
	// UUID is the instance's UUID, or the GPU's for a whole GPU.
	UUID string
	// GPU is the position in Node.GPUs of the GPU it belongs to.
	GPU int
}

// Units lists the node's units in GPU order, each GPU's MIG instances in
// their order; instances without a UUID are skipped.
func (n *Node) Units() []Unit {
	var out []Unit
	for i, g := range n.GPUs {
		if g.MIGMode == MIGEnabled && len(g.MIGInstances) > 0 {
			for _, m := range g.MIGInstances {
				if m.UUID != "" {
					out = append(out, Unit{UUID: m.UUID, GPU: i})
				}
			}
			continue
		}
		out = append(out, Unit{UUID: g.UUID, GPU: i})
	}
	return out
}

// UnitUUIDs is Units' UUIDs.
func (n *Node) UnitUUIDs() []string {
	units := n.Units()
	out := make([]string, len(units))
	for i, u := range units {
		out[i] = u.UUID
	}
	return out
}
