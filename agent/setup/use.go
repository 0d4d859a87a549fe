package setup

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/metrics"
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
func runSimMeter(ctx context.Context, m *SimMeter) {
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

// UseSource is what a node's use records (its GPUUse object) are built
// from: each pod's shares as handed out beside the node arbiter's use
// windows, simulated ones (Sim not nil) labelled so, and the memory in
// use where the interception library accounts it.
type UseSource struct {
	Node    metrics.Node // the GPUs and the shares handed out on them
	Arbiter *arbiter.Arbiter
	// Sim is the simulated meter (nil on measured GPUs): its loads'
	// memory is each simulated share's memory in use.
	Sim *SimMeter
	// MPS: NVIDIA MPS shares the GPUs and nothing measures time.
	MPS bool
	// Intercept: the containers run with the interception library, whose
	// accounting (Arbiter.Memory) is their memory in use.
	Intercept bool
	Log       *slog.Logger
}

// Records builds the node's use records at now.
func (u UseSource) Records(ctx context.Context, now time.Time) nodeuse.Status {
	window, rule, metered := u.Arbiter.UseRule()
	n := usepub.Node{Inventory: u.Node.Inventory(), Allocations: u.Node.Allocations(), Seats: u.Arbiter.Snapshot(),
		Window: window, Rule: rule, Metered: metered, MPS: u.MPS}
	if u.Intercept {
		if mem, err := u.Arbiter.Memory(ctx); err == nil {
			n.MemoryMiB = make(map[[2]string]int64, len(mem))
			for _, m := range mem {
				n.MemoryMiB[[2]string{m.Key, m.GPU}] = int64(m.Bytes >> 20)
			}
		} else if u.Log != nil {
			u.Log.Debug("GPU use: memory in use not read", "err", err)
		}
	}
	if u.Sim != nil {
		n.SimMemoryMiB = u.Sim.MemoryMiB()
	}
	return usepub.Records(n, now)
}

// useLoop publishes the node's GPU use (its GPUUse object) every
// o.UsePeriod, a large change sooner.
func useLoop(ctx context.Context, o Options, src UseSource, core kubernetes.Interface, dyn dynamic.Interface) *usepub.Loop {
	return &usepub.Loop{
		Records: func(now time.Time) nodeuse.Status { return src.Records(ctx, now) },
		Sink:    &kube.UsePublisher{Core: core, Dynamic: dyn, Node: o.NodeName, InstallCRD: o.InstallCRD},
		Pacer:   gpuuse.Pacer{Period: o.UsePeriod},
		Log:     o.Log,
	}
}
