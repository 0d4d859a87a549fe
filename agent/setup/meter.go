package setup

import (
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/arbiter/nvmlmeter"
)

// nvmlMeter opens the node arbiter's utilisation meter on NVML. A GPU
// process belongs to the allocation of its pod (from its cgroup) or, in a
// pod with several GPU containers, to the one its TESSERA_CONTAINER_ID
// names. PIDs are the host's, so the agent needs the host PID namespace.
func nvmlMeter(allocations func() []checkpoint.Entry, log *slog.Logger) (*nvmlmeter.Meter, error) {
	return nvmlmeter.Open(nvml.New(), nvmlmeter.Options{Logger: log, Resolver: nvmlmeter.First{
		nvmlmeter.Cgroup{Lookup: podLookup(allocations)},
		nvmlmeter.Environ{},
	}})
}

// podLookup maps a container to the allocation of its pod when the pod
// has exactly one. (The allocation key hashes the container's name, which
// the cgroup does not carry, so a pod with several is left to Environ.)
func podLookup(allocations func() []checkpoint.Entry) func(nvmlmeter.Container) (string, bool) {
	return func(c nvmlmeter.Container) (string, bool) {
		key := ""
		for _, e := range allocations() {
			if e.PodUID != c.PodUID {
				continue
			}
			if key != "" {
				return "", false
			}
			key = e.Key
		}
		return key, key != ""
	}
}
