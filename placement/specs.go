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
		n := &c.Nodes[i]
		s.cpuMilli = max(s.cpuMilli, n.CPUMilli)
		s.gpuMilli = max(s.gpuMilli, int64(len(n.GPUs))*request.Whole)
	}
	s.cpuMilli = max(s.cpuMilli, 1)
	s.gpuMilli = max(s.gpuMilli, 1)
	return s
}
