package placement

// pickWhole chooses count GPUs for a whole-GPU request among usable (GPU
// positions, ascending). Without topology it takes the lowest positions.
// With NVLink or NUMA information it prefers the set whose members share
// the most NVLink lanes and NUMA nodes: for each start GPU it grows a set
// greedily and keeps the best set (ties to the lowest positions).
func pickWhole(n *Node, usable []int, count int) []int {
	if count <= 0 || len(usable) < count {
		return nil
	}
	if count == 1 || !hasTopology(n) {
		return usable[:count:count] // the caller's list (see nodeScore)
	}
	var best []int
	bestScore := -1
	for _, start := range usable {
		set := []int{start}
		score := 0
		for len(set) < count {
			pick, pickGain := -1, -1
			for _, cand := range usable {
				if contains(set, cand) {
					continue
				}
				gain := 0
				for _, m := range set {
					gain += affinity(n, m, cand)
				}
				if gain > pickGain {
					pick, pickGain = cand, gain
				}
			}
			set = append(set, pick)
			score += pickGain
		}
		if score > bestScore {
			best, bestScore = set, score
		}
	}
	return best
}

// affinity is how well two GPUs of a node work together: NVLink lanes
// weigh most, a shared NUMA node adds one.
func affinity(n *Node, a, b int) int {
	s := 0
	if n.NVLinks != nil {
		s += 4 * n.NVLinks[a][b]
	}
	if na, nb := n.GPUs[a].NUMANode, n.GPUs[b].NUMANode; na >= 0 && na == nb {
		s++
	}
	return s
}

func hasTopology(n *Node) bool {
	if n.NVLinks != nil {
		return true
	}
	for i := range n.GPUs {
		if n.GPUs[i].NUMANode >= 0 {
			return true
		}
	}
	return false
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// pickBestFitShare chooses, for a sharing pod, the usable GPU with the least
// compute free (lowest position on ties).
func pickBestFitShare(n *Node, usable []int) int {
	best := -1
	for _, i := range usable {
		if best < 0 || n.GPUs[i].FreeMilli < n.GPUs[best].FreeMilli {
			best = i
		}
	}
	return best
}

// defaultGPUs is the GPU choice every policy without its own uses:
// best-fit for sharing pods, topology-aware whole GPUs otherwise. The
// list may alias usable (see nodeScore).
func defaultGPUs(n *Node, p *Pod, usable []int) []int {
	if p.GPUCount() == 0 {
		return nil
	}
	if p.Sharing() {
		return oneOf(usable, pickBestFitShare(n, usable))
	}
	return pickWhole(n, usable, p.GPUCount())
}

// oneOf returns the one-GPU list [gpu] as a piece of usable, which holds
// gpu, so that scoring a node allocates nothing (see nodeScore).
func oneOf(usable []int, gpu int) []int {
	for k, i := range usable {
		if i == gpu {
			return usable[k : k+1 : k+1]
		}
	}
	return []int{gpu}
}
