package setup

import (
	"context"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/usepub"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// simRefresh is how often the simulated meter learns new containers'
// loads: a container's first seconds may run nothing, well inside the
// first use window.
const simRefresh = 2 * time.Second

// runSimMeter keeps the simulated meter's loads current until ctx ends.
func runSimMeter(ctx context.Context, m *simMeter) {
	t := time.NewTicker(simRefresh)
	defer t.Stop()
	for {
		m.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// useLoop publishes the node's GPU use (its GPUUse object) every
// o.UsePeriod, a large change sooner: each pod's shares as handed out
// beside the arbiter's use windows, simulated ones (sim not nil) labelled
// so, and the memory in use where the interception library accounts it.
func useLoop(ctx context.Context, o Options, arb *arbiter.Arbiter, shares *nodeShares, sim *simMeter, mpsMode bool,
	core kubernetes.Interface, dyn dynamic.Interface) *usepub.Loop {
	return &usepub.Loop{
		Records: func(now time.Time) nodeuse.Status {
			window, rule, metered := arb.UseRule()
			n := usepub.Node{Inventory: shares.Inventory(), Allocations: shares.Allocations(), Seats: arb.Snapshot(),
				Window: window, Rule: rule, Metered: metered, MPS: mpsMode}
			if o.Paths.HostInterceptLibrary != "" {
				if mem, err := arb.Memory(ctx); err == nil {
					n.MemoryMiB = make(map[[2]string]int64, len(mem))
					for _, m := range mem {
						n.MemoryMiB[[2]string{m.Key, m.GPU}] = int64(m.Bytes >> 20)
					}
				} else {
					o.Log.Debug("GPU use: memory in use not read", "err", err)
				}
			}
			if sim != nil {
				n.SimMemoryMiB = sim.MemoryMiB()
			}
			return usepub.Records(n, now)
		},
		Sink:  &kube.UsePublisher{Core: core, Dynamic: dyn, Node: o.NodeName, InstallCRD: o.InstallCRD},
		Pacer: gpuuse.Pacer{Period: o.UsePeriod},
		Log:   o.Log,
	}
}
