package placement

// okMIG rejects MIG requests: MIG placement is not implemented yet (it
// comes with the MIG issue), so such a pod is infeasible everywhere, with a
// reason that says so.
func okMIG(_ *Node, p *Pod) bool { return p.GPU.MIGProfile == "" }

func whyMIG(_ *Node, p *Pod) string {
	return "MIG profile " + p.GPU.MIGProfile + " requested: MIG placement is not supported yet"
}
