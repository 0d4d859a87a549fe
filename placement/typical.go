package placement

import (
	"cmp"
	"slices"
	"strings"
)

// Shape is a pod's resource shape as fragmentation sees it: CPU, GPU share
// per GPU, GPU count and allowed models ("|"-joined, "" for any). A MIG
// request's shape names its profile (lower case) and has no GPU share.
type Shape struct {
	CPUMilli   int64
	GPUMilli   int64
	GPUCount   int
	Models     string
	MIGProfile string
}

// ShapeOf returns the shape of a pod.
func ShapeOf(p *Pod) Shape {
	if p.MIG() {
		return Shape{CPUMilli: p.CPUMilli, GPUCount: p.GPUCount(), Models: strings.Join(p.GPU.Models, "|"),
			MIGProfile: strings.ToLower(strings.TrimSpace(p.GPU.MIGProfile))}
	}
	return Shape{CPUMilli: p.CPUMilli, GPUMilli: p.MilliPerGPU(), GPUCount: p.GPUCount(), Models: strings.Join(p.GPU.Models, "|")}
}

// split separates the MIG shapes of d from the others, each part's
// weights renormalised to sum to 1: the fragmentation and hole models
// read the others, the MIG planner the MIG shapes.
func (d Distribution) split() (other, mig Distribution) {
	var wo, wm float64
	for _, t := range d {
		if t.Shape.MIGProfile != "" {
			mig = append(mig, t)
			wm += t.Weight
		} else {
			other = append(other, t)
			wo += t.Weight
		}
	}
	if len(mig) == 0 {
		return d, nil
	}
	for i := range other {
		other[i].Weight /= wo
	}
	for i := range mig {
		mig[i].Weight /= wm
	}
	return other, mig
}

func (s Shape) allows(model string) bool {
	if s.Models == "" {
		return true
	}
	for m := range strings.SplitSeq(s.Models, "|") {
		if m == model {
			return true
		}
	}
	return false
}

// Typical is one typical shape and its probability.
type Typical struct {
	Shape  Shape
	Weight float64
	// MemoryMiB is the mean host memory of the pods of this shape (the
	// shape itself leaves memory out, as the study does).
	MemoryMiB float64
}

// Distribution is the typical-pod distribution fragmentation is measured
// against; weights sum to 1.
type Distribution []Typical

// ShapeCounter counts pod shapes; it learns a distribution from a trace
// (offline) or from the pods that have arrived so far (online).
type ShapeCounter struct {
	counts map[Shape]float64
	mem    map[Shape]float64
	total  float64
}

// Add counts one pod.
func (sc *ShapeCounter) Add(p *Pod) {
	if sc.counts == nil {
		sc.counts = map[Shape]float64{}
		sc.mem = map[Shape]float64{}
	}
	s := ShapeOf(p)
	sc.counts[s]++
	sc.mem[s] += float64(p.MemoryMiB)
	sc.total++
}

// Total is the number of pods counted.
func (sc *ShapeCounter) Total() float64 { return sc.total }

// Typical returns the most popular shapes that together make up at least
// popularity (0..1] of the pods counted, most popular first, weights
// renormalised to sum to 1. Equal counts are ordered by shape, larger
// first, so the result is deterministic. MIG requests are cut apart:
// the most popular MIG shapes making up popularity of the MIG requests
// follow the others, each part weighted by its share of the pods, so that
// rare MIG requests among many shares still inform the MIG planner.
func (sc *ShapeCounter) Typical(popularity float64) Distribution {
	if sc.total == 0 {
		return nil
	}
	var other, mig Distribution
	var migTotal float64
	for s, n := range sc.counts {
		t := Typical{Shape: s, Weight: n, MemoryMiB: sc.mem[s] / n}
		if s.MIGProfile != "" {
			mig = append(mig, t)
			migTotal += n
		} else {
			other = append(other, t)
		}
	}
	out := cutTypical(other, popularity, sc.total-migTotal, sc.total)
	return append(out, cutTypical(mig, popularity, migTotal, sc.total)...)
}

// cutTypical sorts shapes (weights are counts) by popularity, keeps the
// most popular covering popularity of total, and scales their weights to
// sum to total/all.
func cutTypical(all Distribution, popularity, total, whole float64) Distribution {
	if total == 0 {
		return nil
	}
	slices.SortFunc(all, func(a, b Typical) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return -compareShape(a.Shape, b.Shape)
	})
	var cum float64
	k := 0
	for k < len(all) && cum < popularity*total {
		cum += all[k].Weight
		k++
	}
	out := all[:k]
	for i := range out {
		out[i].Weight /= cum
		if total != whole {
			out[i].Weight *= total / whole
		}
	}
	return out
}

func compareShape(a, b Shape) int {
	if c := cmp.Compare(a.CPUMilli, b.CPUMilli); c != 0 {
		return c
	}
	if c := cmp.Compare(a.GPUMilli, b.GPUMilli); c != 0 {
		return c
	}
	if c := cmp.Compare(a.GPUCount, b.GPUCount); c != 0 {
		return c
	}
	if c := strings.Compare(a.Models, b.Models); c != 0 {
		return c
	}
	return strings.Compare(a.MIGProfile, b.MIGProfile)
}

// TypicalShapes is the offline distribution of a whole trace.
func TypicalShapes(pods []Pod, popularity float64) Distribution {
	var sc ShapeCounter
	for i := range pods {
		sc.Add(&pods[i])
	}
	return sc.Typical(popularity)
}
