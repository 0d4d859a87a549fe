package nvmlmeter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/arbiter"
)

// DefaultMaxAge bounds how old a sample may be to count: on the first call
// for a GPU, and after a pause, older samples are skipped.
const DefaultMaxAge = time.Second

// Options configure a Meter.
type Options struct {
	// Resolver maps processes to client keys (required).
	Resolver Resolver
	// MaxAge is DefaultMaxAge when 0; [1ms, 1h].
	MaxAge time.Duration
	// Now is the wall clock NVML's sample timestamps (µs since the Unix
	// epoch) are compared with; time.Now when nil.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Meter implements arbiter.Meter from NVML per-process utilisation samples.
// It is safe for concurrent use.
type Meter struct {
	lib  nvml.Interface
	opts Options

	mu   sync.Mutex
	gpus map[string]*gpuState
}

// gpuState is what the meter remembers about one GPU.
type gpuState struct {
	dev nvml.Device
	// lastSeen is the newest sample timestamp taken, µs since the epoch.
	lastSeen uint64
	// unsupported is set once NVML says the GPU (e.g. a MIG instance)
	// has no per-process samples; it is then never asked again.
	unsupported bool
}

var _ arbiter.Meter = (*Meter)(nil)

// Open initialises NVML on lib (nvml.New() on a real host, a mock from
// github.com/NVIDIA/go-nvml/pkg/nvml/mock in tests) and returns a Meter;
// Close releases NVML.
func Open(lib nvml.Interface, o Options) (*Meter, error) {
	if o.Resolver == nil {
		return nil, errors.New("nvml meter: resolver: must be set")
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxAge < time.Millisecond || o.MaxAge > time.Hour {
		return nil, fmt.Errorf("nvml meter: maxAge: must be in [1ms, 1h], got %v", o.MaxAge)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml meter: nvmlInit: %w", ret)
	}
	return &Meter{lib: lib, opts: o, gpus: map[string]*gpuState{}}, nil
}

// Close shuts NVML down (NVML counts Init and Shutdown calls, so other
// users in the process are not affected).
func (m *Meter) Close() error {
	if ret := m.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml meter: nvmlShutdown: %w", ret)
	}
	return nil
}

// Busy implements arbiter.Meter. It takes the GPU's samples newer than the
// last call's (and at most MaxAge old), averages each process's SM
// utilisation over its samples, and sums the processes of each client,
// capped at 1. Clients without a sample this time are absent, as are
// processes of clients not in keys. No samples at all (NVML's NOT_FOUND) is
// an empty answer, not an error; so is a GPU that has no per-process
// samples (NOT_SUPPORTED, e.g. a MIG instance), which is logged once.
func (m *Meter) Busy(ctx context.Context, uuid string, keys []string) (map[string]float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, err := m.gpu(uuid)
	if err != nil {
		return nil, err
	}
	if g.unsupported {
		return map[string]float64{}, nil
	}
	since := g.lastSeen
	if oldest := m.opts.Now().Add(-m.opts.MaxAge).UnixMicro(); oldest > 0 && uint64(oldest) > since {
		since = uint64(oldest)
	}
	samples, ret := g.dev.GetProcessUtilization(since)
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		return map[string]float64{}, nil
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		g.unsupported = true
		m.opts.Logger.WarnContext(ctx, "nvml meter: GPU has no per-process utilisation; its clients keep the static token rate",
			"gpu", uuid, "nvml", ret.Error())
		return map[string]float64{}, nil
	case ret != nvml.SUCCESS:
		return nil, fmt.Errorf("nvml meter: GPU %s: GetProcessUtilization: %w", uuid, ret)
	}
	// Average each process's new samples.
	type acc struct{ sum, n uint64 }
	perPID := map[uint32]*acc{}
	for _, s := range samples {
		if s.TimeStamp <= since {
			continue
		}
		g.lastSeen = max(g.lastSeen, s.TimeStamp)
		a := perPID[s.Pid]
		if a == nil {
			a = &acc{}
			perPID[s.Pid] = a
		}
		a.sum += uint64(min(s.SmUtil, 100))
		a.n++
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := map[string]float64{}
	var errs []error
	for pid, a := range perPID {
		key, ok, err := m.opts.Resolver.Resolve(ctx, pid)
		if err != nil {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		if !ok || !want[key] {
			continue
		}
		out[key] = min(1, out[key]+float64(a.sum)/float64(a.n)/100)
	}
	if len(errs) > 0 {
		// A process that cannot be examined leaves its client
		// under-measured this period; the rest stand.
		m.opts.Logger.DebugContext(ctx, "nvml meter: some processes could not be resolved", "gpu", uuid, "err", errors.Join(errs...))
	}
	return out, nil
}

// gpu returns the GPU's state, getting its handle on first use.
func (m *Meter) gpu(uuid string) (*gpuState, error) {
	if g := m.gpus[uuid]; g != nil {
		return g, nil
	}
	dev, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml meter: GPU %s: DeviceGetHandleByUUID: %w", uuid, ret)
	}
	g := &gpuState{dev: dev}
	m.gpus[uuid] = g
	return g, nil
}
