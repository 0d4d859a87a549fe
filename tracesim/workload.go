package tracesim

import (
	"math/rand/v2"

	"github.com/tessera-gpu/tessera/placement"
)

// Arrivals builds the arrival sequence the way the FGD study does: the
// trace's pods in a seeded random order, then copies of pods drawn
// uniformly from the trace appended until the total GPU request would pass
// tune x capacityMilli. When the trace alone asks for more than that,
// randomly chosen pods are dropped instead until it does not.
func Arrivals(pods []placement.Pod, capacityMilli int64, tune float64, seed uint64) []placement.Pod {
	rng := rand.New(rand.NewPCG(seed, 0xa441a15))
	out := make([]placement.Pod, len(pods))
	copy(out, pods)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	target := int64(tune * float64(capacityMilli))
	var total int64
	for i := range out {
		total += out[i].TotalGPUMilli()
	}
	for total > target && len(out) > 0 {
		k := rng.IntN(len(out))
		total -= out[k].TotalGPUMilli()
		out = append(out[:k], out[k+1:]...)
	}
	for len(pods) > 0 {
		p := pods[rng.IntN(len(pods))]
		if total+p.TotalGPUMilli() > target {
			break
		}
		total += p.TotalGPUMilli()
		p.Name += "-copy"
		out = append(out, p)
	}
	return out
}
