package placement

import "github.com/tessera-gpu/tessera/request"

// specs are the largest node capacities in a cluster; baseline policies
// normalise resource vectors by them.
type specs struct {
	cpuMilli int64
	gpuMilli int64
}

func clusterSpecs(c *Cluster) specs {
	var s specs
	for i := range c.Nodes {
		s.add(&c.Nodes[i])
	}
	return s.floor()
}

// add takes node n's capacities into s.
func (s *specs) add(n *Node) {
	s.cpuMilli = max(s.cpuMilli, n.CPUMilli)
	s.gpuMilli = max(s.gpuMilli, int64(len(n.GPUs))*request.Whole)
}

// floor returns s with every capacity at least 1 (they divide).
func (s specs) floor() specs {
	s.cpuMilli = max(s.cpuMilli, 1)
	s.gpuMilli = max(s.gpuMilli, 1)
	return s
}
