package placement

import "math"

// Stranding: GPU compute is only usable with the host CPU and memory to
// feed it. Tessera counts the free GPU compute that a node's free CPU (or
// memory) can no longer feed at the CPU (memory) the typical GPU pods ask
// per GPU milli, and minimises its growth, so CPU-only and CPU-heavy pods
// do not drain the CPU of nodes whose GPUs will later need it (at the end
// of an FGD replay of the default openb trace 1.8% of GPU capacity sits
// free on nodes with under 4 CPUs left).

// hostRatios are the CPU milli and memory MiB the typical GPU pods of d
// ask per GPU milli (0 when d has no GPU pods). CPU-only pods are left
// out: they can use CPU that no GPU needs.
func hostRatios(d Distribution) (cpuRatio, memRatio float64) {
	var cpu, mem, gpu float64
	for _, x := range d {
		if x.Shape.GPUCount == 0 {
			continue
		}
		cpu += x.Weight * float64(x.Shape.CPUMilli)
		mem += x.Weight * x.MemoryMiB
		gpu += x.Weight * float64(x.Shape.GPUMilli) * float64(x.Shape.GPUCount)
	}
	if gpu <= 0 {
		return 0, 0
	}
	return cpu / gpu, mem / gpu
}

// stranded is the free GPU compute (milli) that free host resource
// (CPU milli or memory MiB) cannot feed at ratio per GPU milli.
func stranded(freeGPU, free int64, ratio float64) float64 {
	if ratio <= 0 {
		return 0
	}
	return math.Max(0, float64(freeGPU)-float64(free)/ratio)
}
