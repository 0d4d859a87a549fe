package setup

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/discovery/simulated"
)

// SimMeter is the node arbiter's Meter on simulated GPUs: each
// container's GPU time is what its declared load (simulated.LoadEnv in its
// pod spec, from its allocation) runs over the span since the last
// reading, and its readings say Simulated, so they show as simulated and
// never adjust a launch rate. A container that declares no load runs
// nothing. Read only reads what Refresh learnt, so the arbiter's step
// never waits on the API server.
type SimMeter struct {
	allocs func() []checkpoint.Entry
	// env returns each container's literal value of simulated.LoadEnv in
	// a pod; found is false when the pod does not exist.
	env func(ctx context.Context, namespace, pod string) (map[string]string, bool, error)
	now func() time.Time
	log *slog.Logger

	window simulated.Window
	mu     sync.Mutex
	loads  map[string]simulated.Started // replaced whole by Refresh, never changed in place
}

// EnvFunc returns each container's literal value of an environment
// variable in a pod; found is false when the pod does not exist.
type EnvFunc func(ctx context.Context, namespace, pod, env string) (values map[string]string, found bool, err error)

// NewSimMeter is the simulated meter over the allocations allocs returns,
// each container's load read from its pod by env (once), on the clock now.
// Its loads are learnt by Refresh, which the caller runs.
func NewSimMeter(allocs func() []checkpoint.Entry, env EnvFunc, now func() time.Time, log *slog.Logger) *SimMeter {
	return &SimMeter{allocs: allocs, env: func(ctx context.Context, ns, pod string) (map[string]string, bool, error) {
		return env(ctx, ns, pod, simulated.LoadEnv)
	}, now: now, log: log}
}

// Read implements arbiter.Meter.
func (m *SimMeter) Read(_ context.Context, uuid string, keys []string) (arbiter.Reading, error) {
	span, busy, _ := m.window.Busy(uuid, m.now(), keys, func() (map[string]simulated.Started, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.loads, nil
	})
	return arbiter.Reading{Span: span, Busy: busy, Simulated: true}, nil
}

// MemoryMiB is each allocation's declared memory, by key.
func (m *SimMeter) MemoryMiB() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.loads))
	for k, l := range m.loads {
		out[k] = l.Load.MemoryMiB
	}
	return out
}

// Refresh learns the loads of allocations it does not know yet (one read
// of each pod) and forgets those of ended ones.
func (m *SimMeter) Refresh(ctx context.Context) {
	allocs := m.allocs()
	m.mu.Lock()
	known := make(map[string]simulated.Started, len(m.loads))
	for k, l := range m.loads {
		known[k] = l
	}
	m.mu.Unlock()
	next := make(map[string]simulated.Started, len(allocs))
	envs := map[[2]string]map[string]string{}
	for _, e := range allocs {
		if l, ok := known[e.Key]; ok {
			next[e.Key] = l
			continue
		}
		pod := [2]string{e.Namespace, e.Pod}
		env, ok := envs[pod]
		if !ok {
			var found bool
			var err error
			if env, found, err = m.env(ctx, e.Namespace, e.Pod); err != nil || !found {
				if err != nil {
					m.log.Warn("simulated meter: cannot read the pod's load; trying again", "pod", e.Namespace+"/"+e.Pod, "err", err)
				}
				continue
			}
			envs[pod] = env
		}
		l, err := simulated.ParseLoad(env[e.Container])
		if err != nil {
			m.log.Warn("simulated meter: the container's load is not understood; it runs nothing", "pod", e.Namespace+"/"+e.Pod, "container", e.Container, "err", err)
		}
		next[e.Key] = simulated.Started{Start: e.Created, Load: l}
	}
	m.mu.Lock()
	m.loads = next
	m.mu.Unlock()
}
