package placement

import (
	"cmp"
	"slices"

	"github.com/tessera-gpu/tessera/request"
)

// Wasted holes: when a sharing pod takes part of a GPU, the compute left
// free is a hole. Later pods that fit fill it and leave smaller holes,
// until a hole is left that nothing coming fits or that the pods which
// fit are too rare to reach: that last hole is lost. FGD prices a hole by
// whether the next typical pod fits it; Tessera prices it by its expected
// eventual waste, following the holes left inside it:
//
//	W(0) = 0
//	W(h) = (1 - q(h)) h + q(h) * sum over shapes s <= h of p(s | fits) W(h - s)
//
// where p(s | fits) is the share of shape s among the GPU pods that fit in
// h (a whole-GPU or multi-GPU shape fits only a whole free GPU) and q(h) is
// the chance the hole is filled at all. Holes wait while many pods arrive,
// so a hole that at least the fillable share of the GPU pods fit is taken as
// filled (q = 1); below that, q falls in proportion to the share that fits.
// fillableShare is 3%, raised in proportion to the share of GPU pods that
// share a GPU past 45% of them (fillable): the more pods make holes, the
// fewer fillers each hole gets.
// With the openb traces' pods this makes the 190m left by an 810m pod
// (only the rare 160m pods fit) worth about 147m of waste, a 230m hole
// (a popular size fills it exactly) about 19m, and a 60m sliver all of it.
//
// The table ignores GPU model restrictions and the node's CPU (stranding
// covers the CPU side); it is built once per distribution and only read
// afterwards.

// fillableShare is the least share of GPU pods that must fit in a hole
// for it to count as surely filled; fillable raises it in proportion to
// how many of the GPU pods make holes. Chosen on the openb traces (seeds
// 42-45): 0.03 and 0.035 land within 0.03 point of each other on default,
// gpushare60, gpushare100 and multigpu40; 0.025 loses up to 0.16 point
// and 0.05 loses 0.1 on default (it counts 230-310m holes as partly lost).
const fillableShare = 0.03

// fillablePerSharing is the fillable share per unit of the share of GPU
// pods that are sharing pods (0.03 / 0.45: default-like traces, where 44%
// of the GPU pods share a GPU, keep fillableShare). The more of the GPU
// pods leave holes, the more holes each filler is shared among, so a
// filler shape must be more popular to fill a hole surely: on the openb
// gpushare traces (57-100% sharing pods) it gains up to 0.27 point
// (gpushare100, seeds 42-51) and leaves the other traces as they were.
const fillablePerSharing = 0.0667

// fillable is the fillable share for distribution d: fillableShare, or
// fillablePerSharing times the share of GPU pods that share a GPU when
// that is more.
func fillable(d Distribution) float64 {
	var gpu, sharing float64
	for _, t := range d {
		if t.Shape.GPUCount == 0 || t.Weight <= 0 {
			continue
		}
		gpu += t.Weight
		if t.Shape.GPUCount == 1 && t.Shape.GPUMilli < request.Whole {
			sharing += t.Weight
		}
	}
	if gpu == 0 {
		return fillableShare
	}
	return max(fillableShare, fillablePerSharing*sharing/gpu)
}

// holeWaste is W(h) for h in 0..Whole milli.
type holeWaste [request.Whole + 1]float64

// newHoleWaste builds the table for distribution d. Without GPU pods
// nothing fills a hole and W(h) = h.
func newHoleWaste(d Distribution, fillable float64) *holeWaste {
	type share struct {
		milli int64
		p     float64
	}
	var shares []share
	var total float64
	for _, t := range d {
		if t.Shape.GPUCount == 0 || t.Weight <= 0 {
			continue // CPU-only pods fill no hole
		}
		m := t.Shape.GPUMilli
		if t.Shape.GPUCount > 1 || m > request.Whole {
			m = request.Whole
		}
		if m <= 0 {
			continue // a memory-only share: its compute is not known here
		}
		shares = append(shares, share{m, t.Weight})
		total += t.Weight
	}
	w := new(holeWaste)
	for h := int64(1); h <= request.Whole; h++ {
		var fit, next float64
		for _, s := range shares {
			if s.milli <= h {
				fit += s.p
				next += s.p * w[h-s.milli]
			}
		}
		if fit == 0 {
			w[h] = float64(h)
			continue
		}
		q := 1.0
		if share := fit / total; share < fillable {
			q = share / fillable
		}
		w[h] = q*next/fit + (1-q)*float64(h)
	}
	return w
}

// freeGPUFactor is how much more a whole free GPU is expected to waste
// than the table says, where the static table is used (see
// contestFreeGPU). Chosen on the openb traces (seeds 42-51): on each of
// the seven traces that use the static table 1.5 and 2.4 gain +0.03 to
// +0.05 point and 2 gains +0.04 to +0.07; 3 loses 2.7 points on default
// (seeds 42-45: sharing pods then leave good pairings for free GPUs).
const freeGPUFactor = 2

// contestFreeGPU raises W(request.Whole) by freeGPUFactor. The table prices a free
// GPU as if a pod drawn from the whole distribution filled it, but free
// GPUs are contested: small sharing pods go into partial holes, so the
// pods that take the last free GPUs are mostly those that fit nowhere else,
// among them the 810m pods that leave a 190m hole. Counting a free GPU as
// worth more makes a small sharing pod with no good pairing open a free
// GPU rather than settle in a poor partial hole, where a later large share
// can join it: on default (seed 42) every 160m pod ends beside an 810m
// pod (101 of 106 before), 15 fewer 810m pods sit alone and a few more
// 220-230m pods are placed, for +0.04 point. Only the static table
// is raised: where holes compete (holeSupply) a free GPU is already priced
// through the capped holes left in it, and doubling it there loses 0.7 to
// 1.8 points on the gpushare traces.
func (w *holeWaste) contestFreeGPU() {
	w[request.Whole] *= freeGPUFactor
}

// at is W(h), h clamped to 0..Whole.
func (w *holeWaste) at(h int64) float64 {
	return w[min(max(h, 0), request.Whole)]
}

// Hole supply: when most GPU pods share a GPU (more than
// fillableShare / fillablePerSharing of them, where fillable rises above
// its floor), holes compete for the few pods that fit them, and a hole
// size already plentiful in the cluster is less likely to be filled than
// the static table says. Per decision the policy then takes the GPU pods
// expected until the cluster is full (its free GPU compute over the mean
// GPU compute of a GPU pod) in the typical proportions, lets the partial
// holes present take them smallest hole first (each the largest shape that
// fits, as best fit does), and caps q(h) of a new hole of size h by the
// fitting pods left over once the holes of size h or less have theirs.
// Below that share the static table is kept (on the openb traces the cap
// only moved the default-like traces by noise, ±0.02 point).

// holeSupply holds what the per-decision table needs from the
// distribution; it is built once and only read.
type holeSupply struct {
	shapes   []holeShape // GPU pod sizes, p summing to 1
	meanGPU  float64     // mean GPU milli of a GPU pod
	fillable float64
	// below[h] is the share of GPU pods of h milli or less, and ample the
	// table when the cap never binds (see tableOf).
	below [request.Whole]float64
	ample *holeWaste
}

type holeShape struct {
	milli int64
	p     float64
}

// newHoleSupply returns the supply model for d, or nil when d's GPU pods
// do not share GPUs often enough for holes to compete (or d has none).
func newHoleSupply(d Distribution, fillable float64) *holeSupply {
	if fillable <= fillableShare {
		return nil
	}
	s := &holeSupply{fillable: fillable}
	var total float64
	for _, t := range d {
		if t.Shape.GPUCount == 0 || t.Weight <= 0 {
			continue
		}
		m := t.Shape.GPUMilli
		s.meanGPU += t.Weight * float64(m) * float64(t.Shape.GPUCount)
		total += t.Weight
		if t.Shape.GPUCount > 1 || m > request.Whole {
			m = request.Whole
		}
		if m <= 0 {
			continue
		}
		s.shapes = append(s.shapes, holeShape{m, t.Weight})
	}
	if total <= 0 || s.meanGPU <= 0 || len(s.shapes) == 0 {
		return nil
	}
	s.meanGPU /= total
	var fit float64
	for i := range s.shapes {
		fit += s.shapes[i].p
	}
	for i := range s.shapes {
		s.shapes[i].p /= fit
	}
	// largest first: the greedy matching takes the largest shape that fits
	slices.SortStableFunc(s.shapes, func(a, b holeShape) int { return cmp.Compare(b.milli, a.milli) })
	for _, x := range s.shapes {
		for h := x.milli; h < request.Whole; h++ {
			s.below[h] += x.p
		}
	}
	s.ample = s.build(nil, 0)
	return s
}

// table builds the hole table for the cluster c as it is now, counting
// its holes by class when ix (c's class index) is not nil. It only reads
// c, ix and s; the result must only be read (it may be s's ample table).
func (s *holeSupply) table(c *Cluster, ix *classIndex) *holeWaste {
	var holes [request.Whole]float64 // partial holes by size
	var free float64
	if ix != nil {
		free = ix.holeCounts(c, &holes)
		return s.tableOf(&holes, free)
	}
	for i := range c.Nodes {
		for _, g := range c.Nodes[i].GPUs {
			free += float64(g.FreeMilli)
			if g.FreeMilli > 0 && g.FreeMilli < request.Whole {
				holes[g.FreeMilli]++
			}
		}
	}
	return s.tableOf(&holes, free)
}

// tableOf builds the hole table from the cluster's partial holes by size
// and its free GPU compute.
//
// The cap binds only where fewer than one fitting pod is left over: the
// pods left of sizes up to h are at least those expected (pods times the
// share of sizes up to h) less the holes up to h (each hole takes at most
// one). Where that bound is at least 2 for every size (1 with room for
// rounding), every q(h) is uncapped and the table is the one built
// without holes (ample, built once): the same numbers, without the
// matching.
func (s *holeSupply) tableOf(holes *[request.Whole]float64, free float64) *holeWaste {
	pods := free / s.meanGPU
	var taken float64
	for h := 1; h < request.Whole; h++ {
		taken += holes[h]
		if s.below[h] > 0 && pods*s.below[h]-taken < 2 {
			return s.build(holes, pods)
		}
	}
	return s.ample
}

// build is tableOf's table, worked out; with holes nil, the cap never
// binds (ample).
func (s *holeSupply) build(holes *[request.Whole]float64, pods float64) *holeWaste {
	left := make([]float64, len(s.shapes))
	for j, x := range s.shapes {
		left[j] = pods * x.p
	}
	w := new(holeWaste)
	for h := int64(1); h <= request.Whole; h++ {
		if h < request.Whole && holes != nil {
			need := holes[h]
			for j := 0; j < len(s.shapes) && need > 0; j++ {
				if s.shapes[j].milli > h || left[j] <= 0 {
					continue
				}
				take := min(need, left[j])
				left[j] -= take
				need -= take
			}
		}
		var fit, next, spare float64
		for j, x := range s.shapes {
			if x.milli <= h {
				fit += x.p
				next += x.p * w[h-x.milli]
				spare += left[j]
			}
		}
		if fit == 0 {
			w[h] = float64(h)
			continue
		}
		q := 1.0
		if fit < s.fillable {
			q = fit / s.fillable
		}
		if h < request.Whole && holes != nil {
			q = min(q, spare)
		}
		w[h] = q*next/fit + (1-q)*float64(h)
	}
	return w
}
