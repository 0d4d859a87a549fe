package tracesim

import (
	"fmt"
	"math"
	"strings"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// LoadNodes reads a node list (columns sn, cpu_milli, memory_mib, gpu,
// model) into an empty cluster. Trace model names are opaque labels; GPU
// memory is not tracked (the traces do not give it).
func LoadNodes(path string) (*placement.Cluster, error) {
	t, err := readTable(path, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	return nodesFromTable(t)
}

func nodesFromTable(t *table) (*placement.Cluster, error) {
	c := &placement.Cluster{}
	seen := map[string]int{}
	for i := range t.rows {
		name := t.str(i, "sn")
		if name == "" {
			return nil, fmt.Errorf("%s:%d: column sn: empty node name", t.file, t.lines[i])
		}
		if l, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s:%d: column sn: node %q already listed on line %d", t.file, t.lines[i], name, l)
		}
		seen[name] = t.lines[i]
		cpu, err := t.int(i, "cpu_milli", 1, math.MaxInt32, false)
		if err != nil {
			return nil, err
		}
		mem, err := t.int(i, "memory_mib", 1, math.MaxInt64/2, false)
		if err != nil {
			return nil, err
		}
		gpus, err := t.int(i, "gpu", 0, 64, false)
		if err != nil {
			return nil, err
		}
		model := t.str(i, "model")
		if gpus > 0 && model == "" {
			return nil, fmt.Errorf("%s:%d: column model: empty, but the node has %d GPUs", t.file, t.lines[i], gpus)
		}
		c.Nodes = append(c.Nodes, placement.NewNode(name, cpu, mem, int(gpus), model, 0))
	}
	if len(c.Nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes", t.file)
	}
	return c, nil
}

// LoadPods reads a pod list (columns name, cpu_milli, memory_mib, num_gpu,
// gpu_milli and, when present, gpu_spec). A pod with gpu_milli below 1000
// shares one GPU; gpu_spec ("V100M16|V100M32") restricts GPU models.
func LoadPods(path string) ([]placement.Pod, error) {
	t, err := readTable(path, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return nil, err
	}
	return podsFromTable(t)
}

func podsFromTable(t *table) ([]placement.Pod, error) {
	pods := make([]placement.Pod, 0, len(t.rows))
	for i := range t.rows {
		p := placement.Pod{Name: t.str(i, "name")}
		var err error
		if p.CPUMilli, err = t.int(i, "cpu_milli", 0, math.MaxInt32, true); err != nil {
			return nil, err
		}
		if p.MemoryMiB, err = t.int(i, "memory_mib", 0, math.MaxInt64/2, true); err != nil {
			return nil, err
		}
		n, err := t.int(i, "num_gpu", 0, request.MaxCount, true)
		if err != nil {
			return nil, err
		}
		milli, err := t.int(i, "gpu_milli", 0, request.Whole, true)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			if milli == 0 {
				milli = request.Whole
			}
			if n > 1 && milli < request.Whole {
				return nil, fmt.Errorf("%s:%d: column gpu_milli: %d shares a GPU, but num_gpu is %d (sharing pods take one GPU)", t.file, t.lines[i], milli, n)
			}
			p.GPU = request.GPU{Count: int(n), ComputeMilli: milli, ComputeLimitMilli: milli}
			for m := range strings.SplitSeq(t.str(i, "gpu_spec"), "|") {
				if m = strings.TrimSpace(m); m != "" {
					p.GPU.Models = append(p.GPU.Models, m)
				}
			}
		}
		pods = append(pods, p)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("%s: no pods", t.file)
	}
	return pods, nil
}
