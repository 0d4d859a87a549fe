package queueing

import "fmt"

// Resources is an amount of every resource fair share is measured in.
type Resources struct {
	GPUMilli     int64 `json:"gpuMilli"`     // GPU compute, thousandths of a GPU
	GPUMemoryMiB int64 `json:"gpuMemoryMiB"` // GPU memory
	CPUMilli     int64 `json:"cpuMilli"`
	MemoryMiB    int64 `json:"memoryMiB"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.GPUMilli + o.GPUMilli, r.GPUMemoryMiB + o.GPUMemoryMiB, r.CPUMilli + o.CPUMilli, r.MemoryMiB + o.MemoryMiB}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.GPUMilli - o.GPUMilli, r.GPUMemoryMiB - o.GPUMemoryMiB, r.CPUMilli - o.CPUMilli, r.MemoryMiB - o.MemoryMiB}
}

// Fits reports whether r <= limit in every resource, where a zero limit
// component means "no limit" for that resource.
func (r Resources) Fits(limit Resources) bool {
	ok := func(v, l int64) bool { return l == 0 || v <= l }
	return ok(r.GPUMilli, limit.GPUMilli) && ok(r.GPUMemoryMiB, limit.GPUMemoryMiB) && ok(r.CPUMilli, limit.CPUMilli) && ok(r.MemoryMiB, limit.MemoryMiB)
}

// Within reports whether r <= o in every resource (zero means zero here).
func (r Resources) Within(o Resources) bool {
	return r.GPUMilli <= o.GPUMilli && r.GPUMemoryMiB <= o.GPUMemoryMiB && r.CPUMilli <= o.CPUMilli && r.MemoryMiB <= o.MemoryMiB
}

// IsZero reports whether every component is zero.
func (r Resources) IsZero() bool { return r == Resources{} }

// DominantShare is the largest share of total that r takes over the
// resources total has (DRF's dominant share).
func (r Resources) DominantShare(total Resources) float64 {
	share := 0.0
	for _, p := range [][2]int64{{r.GPUMilli, total.GPUMilli}, {r.GPUMemoryMiB, total.GPUMemoryMiB}, {r.CPUMilli, total.CPUMilli}, {r.MemoryMiB, total.MemoryMiB}} {
		if p[1] > 0 {
			share = max(share, float64(p[0])/float64(p[1]))
		}
	}
	return share
}

func (r Resources) validate(field string) error {
	for _, c := range []struct {
		name string
		v    int64
	}{{"gpuMilli", r.GPUMilli}, {"gpuMemoryMiB", r.GPUMemoryMiB}, {"cpuMilli", r.CPUMilli}, {"memoryMiB", r.MemoryMiB}} {
		if c.v < 0 {
			return fmt.Errorf("%s.%s: must be >= 0, got %d", field, c.name, c.v)
		}
	}
	return nil
}
