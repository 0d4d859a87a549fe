package tracesim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/tessera-gpu/tessera/placement"
)

// Variant describes a workload made from a trace to stress one regime the
// shared traces do not, so a policy can be checked on data it was not
// chosen on (the study's own variants resample the default trace the same
// way: gpushareNN, multigpuNN, cpuNNN).
type Variant struct {
	// CPUOnly is the number of CPU-only pods in the variant as a multiple
	// of the trace's (1 keeps them; 3 makes CPU bind before GPU on the
	// openb cluster). Extra pods are copies drawn with replacement;
	// below 1 a random subset is kept.
	CPUOnly float64
	// Pinned is the share (0..1) of GPU pods pinned to one GPU model
	// through gpu_spec. The model is drawn in proportion to the cluster's
	// GPUs of each model among the models with a node that has enough GPUs
	// for the pod, so every pinned pod can still fit an empty cluster.
	Pinned float64
	// Seed makes the variant reproducible.
	Seed uint64
}

// Validate checks v's fields.
func (v Variant) Validate() error {
	if math.IsNaN(v.CPUOnly) || v.CPUOnly < 0 || v.CPUOnly > 100 {
		return fmt.Errorf("CPU-only factor %v: want 0 to 100", v.CPUOnly)
	}
	if math.IsNaN(v.Pinned) || v.Pinned < 0 || v.Pinned > 1 {
		return fmt.Errorf("pinned share %v: want 0 to 1", v.Pinned)
	}
	return nil
}

// WriteVariant reads the pod list at tracePath and writes variant v of it
// as CSV to w, with the same columns (gpu_spec added when the trace has
// none and v pins pods). nodes is the cluster the pins are drawn for.
// Rows are written in the trace's order; added CPU-only pods follow, named
// after their original with a "-v<N>" suffix.
func WriteVariant(w io.Writer, tracePath string, nodes *placement.Cluster, v Variant) error {
	if err := v.Validate(); err != nil {
		return err
	}
	t, err := readTable(tracePath, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return err
	}
	// Parse once to check the rows the way a replay will.
	pods, err := podsFromTable(t)
	if err != nil {
		return err
	}
	header := make([]string, len(t.header))
	for name, i := range t.header {
		header[i] = name
	}
	spec, ok := t.header["gpu_spec"]
	if !ok && v.Pinned > 0 {
		spec = len(header)
		header = append(header, "gpu_spec")
	}
	rng := rand.New(rand.NewPCG(v.Seed, 0x76617269616e74)) // "variant"
	pins := newModelPins(nodes)
	var cpuOnly []int
	rows := make([][]string, 0, len(t.rows))
	for i, p := range pods {
		row := make([]string, len(header))
		copy(row, t.rows[i])
		if p.GPUCount() == 0 {
			cpuOnly = append(cpuOnly, i)
		} else if v.Pinned > 0 && rng.Float64() < v.Pinned {
			m, ok := pins.draw(rng, p.GPUCount())
			if !ok {
				return fmt.Errorf("%s:%d: pod %s asks %d GPUs, more than any node of the cluster has", t.file, t.lines[i], p.Name, p.GPUCount())
			}
			row[spec] = m
		}
		rows = append(rows, row)
	}
	rows = resampleCPUOnly(rows, cpuOnly, v.CPUOnly, rng, t.header["name"])
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write variant: %w", err)
	}
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("write variant: %w", err)
	}
	return nil
}

// resampleCPUOnly returns rows with the CPU-only pods (indexes cpuOnly)
// scaled by factor: a seeded random subset below 1, the originals plus
// copies drawn with replacement above.
func resampleCPUOnly(rows [][]string, cpuOnly []int, factor float64, rng *rand.Rand, nameCol int) [][]string {
	want := int(math.Round(factor * float64(len(cpuOnly))))
	if want == len(cpuOnly) || len(cpuOnly) == 0 {
		return rows
	}
	if want < len(cpuOnly) {
		drop := map[int]bool{}
		perm := rng.Perm(len(cpuOnly))
		for _, j := range perm[:len(cpuOnly)-want] {
			drop[cpuOnly[j]] = true
		}
		kept := rows[:0:0]
		for i, r := range rows {
			if !drop[i] {
				kept = append(kept, r)
			}
		}
		return kept
	}
	copies := map[string]int{}
	for k := len(cpuOnly); k < want; k++ {
		src := rows[cpuOnly[rng.IntN(len(cpuOnly))]]
		r := append([]string(nil), src...)
		copies[src[nameCol]]++
		r[nameCol] = src[nameCol] + "-v" + strconv.Itoa(copies[src[nameCol]])
		rows = append(rows, r)
	}
	return rows
}

// modelPins draws GPU models in proportion to the cluster's GPUs of each.
type modelPins struct {
	models []string
	gpus   []int // GPUs of each model
	most   []int // the most GPUs one node of the model has
}

func newModelPins(c *placement.Cluster) *modelPins {
	idx := map[string]int{}
	m := &modelPins{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if len(n.GPUs) == 0 {
			continue
		}
		model := n.GPUs[0].Model
		j, ok := idx[model]
		if !ok {
			j = len(m.models)
			idx[model] = j
			m.models = append(m.models, model)
			m.gpus = append(m.gpus, 0)
			m.most = append(m.most, 0)
		}
		m.gpus[j] += len(n.GPUs)
		m.most[j] = max(m.most[j], len(n.GPUs))
	}
	// A fixed order, so the draw depends only on the seed.
	order := make([]int, len(m.models))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return m.models[order[a]] < m.models[order[b]] })
	s := &modelPins{}
	for _, j := range order {
		s.models = append(s.models, m.models[j])
		s.gpus = append(s.gpus, m.gpus[j])
		s.most = append(s.most, m.most[j])
	}
	return s
}

// draw picks a model with a node of at least count GPUs, in proportion to
// the model's GPUs; false when no model has such a node.
func (m *modelPins) draw(rng *rand.Rand, count int) (string, bool) {
	total := 0
	for j := range m.models {
		if m.most[j] >= count {
			total += m.gpus[j]
		}
	}
	if total == 0 {
		return "", false
	}
	x := rng.IntN(total)
	for j := range m.models {
		if m.most[j] < count {
			continue
		}
		if x < m.gpus[j] {
			return m.models[j], true
		}
		x -= m.gpus[j]
	}
	return "", false // unreachable: x < total
}
