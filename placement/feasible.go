package placement

// unit is one feasibility check: ok is the fast test run on every node;
// why explains a failure and runs only when a reason is wanted.
type unit struct {
	ok  func(n *Node, p *Pod) bool
	why func(n *Node, p *Pod) string
}

// units are the feasibility units in the order they run; the first
// failing unit names the reason. (An array value: nothing package-level
// can be changed.)
func units() [4]unit {
	return [...]unit{
		{okMIG, whyMIG},
		{okCPU, whyCPU},
		{okMemory, whyMemory},
		{okGPUs, whyGPUs},
	}
}

// Feasible reports whether node n can take pod p now, and if not, why.
func Feasible(n *Node, p *Pod) (ok bool, reason string) {
	for _, u := range units() {
		if !u.ok(n, p) {
			return false, u.why(n, p)
		}
	}
	return true, ""
}

// feasible is Feasible without the reason.
func feasible(n *Node, p *Pod) bool {
	for _, u := range units() {
		if !u.ok(n, p) {
			return false
		}
	}
	return true
}

// usableGPUs appends to dst the positions of n's GPUs that can each take
// one GPU's worth of p (model allowed, enough compute and memory free).
func usableGPUs(dst []int, n *Node, p *Pod) []int {
	for i := range n.GPUs {
		if gpuOK(p, &n.GPUs[i]) {
			dst = append(dst, i)
		}
	}
	return dst
}
