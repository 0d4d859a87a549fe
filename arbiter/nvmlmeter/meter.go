package nvmlmeter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/arbiter"
)

// DefaultMaxAge bounds how far back a reading reaches: after a pause, ticks
// older than this are skipped and the first one counted covers at most
// this much.
const DefaultMaxAge = time.Second

// Options configure a Meter.
type Options struct {
	// Resolver maps processes to client keys (required).
	Resolver Resolver
	// MaxAge is DefaultMaxAge when 0; [1ms, 1h]. It must exceed the
	// caller's period.
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
	// lastTick is the newest sampling tick read, µs since the epoch; 0
	// before the first reading.
	lastTick uint64
	// noTicks is set once NVML says the GPU has no device utilisation
	// samples: ticks are then the distinct timestamps of the process
	// samples.
	noTicks bool
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

// Read implements arbiter.Meter.
//
// NVML samples utilisation once per tick of the driver's (every ~200 ms on
// an H200 with driver 580, idle or not) and gives the whole tick to the
// process that ran, or, when several did, to ONE of them, with the device's
// utilisation; the others have no sample that tick. So the meter works in
// whole ticks: the tick timeline comes from the device's utilisation
// samples (GetSamples(GPU_UTILIZATION_SAMPLES)), each tick as long as the
// gap to the one before; a process sample belongs to the tick with its
// timestamp (the first at or after it) and counts as SM utilisation/100 ×
// that tick's length, for the client its process resolves to (capped at
// the tick per client). Span is the new ticks' total length. Summed over
// many ticks, each client's busy time is its GPU time; single readings are
// not (see package arbiter's feedback).
//
// The first reading of a GPU only sets the baseline (Span 0). Ticks older
// than MaxAge are skipped, and a tick reaches back at most to MaxAge ago.
// Samples newer than the newest tick wait for the next reading. Without
// device samples (NOT_SUPPORTED, logged once), the ticks are the distinct
// timestamps of the process samples, which leaves idle ticks out: the gap
// before a tick then counts whole, up to MaxAge.
//
// Processes of clients not in keys are left out. No process samples
// (NVML's NOT_FOUND) with new ticks means every client was idle; a GPU
// without per-process samples (NOT_SUPPORTED, e.g. a MIG instance, logged
// once) gives empty readings.
func (m *Meter) Read(ctx context.Context, uuid string, keys []string) (arbiter.Reading, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, err := m.gpu(uuid)
	if err != nil {
		return arbiter.Reading{}, err
	}
	if g.unsupported {
		return arbiter.Reading{}, nil
	}
	cutoff := uint64(max(0, m.opts.Now().Add(-m.opts.MaxAge).UnixMicro()))
	var ticks []uint64
	if !g.noTicks {
		if ticks, err = m.deviceTicks(ctx, g, uuid); err != nil {
			return arbiter.Reading{}, err
		}
		if !g.noTicks {
			if len(ticks) == 0 {
				return arbiter.Reading{}, nil
			}
			if g.lastTick == 0 {
				g.lastTick = ticks[len(ticks)-1]
				return arbiter.Reading{}, nil
			}
		}
	}
	since := max(g.lastTick, cutoff)
	samples, ret := g.dev.GetProcessUtilization(since)
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		samples = nil
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		g.unsupported = true
		m.opts.Logger.WarnContext(ctx, "nvml meter: GPU has no per-process utilisation; its clients keep the static token rate",
			"gpu", uuid, "nvml", ret.Error())
		return arbiter.Reading{}, nil
	case ret != nvml.SUCCESS:
		return arbiter.Reading{}, fmt.Errorf("nvml meter: GPU %s: GetProcessUtilization: %w", uuid, ret)
	}
	if g.noTicks {
		ticks = distinct(samples, since)
		if len(ticks) == 0 {
			return arbiter.Reading{}, nil
		}
		if g.lastTick == 0 {
			g.lastTick = ticks[len(ticks)-1]
			return arbiter.Reading{}, nil
		}
	}
	// Each tick's length, µs: the gap to the previous tick, from no
	// further back than the cutoff; 0 for a tick that only moves the
	// baseline.
	length := make([]uint64, len(ticks))
	var out arbiter.Reading
	prev := g.lastTick
	for i, t := range ticks {
		if t > cutoff {
			length[i] = t - max(prev, cutoff)
			out.Span += time.Duration(length[i]) * time.Microsecond
		}
		prev = t
	}
	newest := ticks[len(ticks)-1]
	g.lastTick = newest
	// SM utilisation per process and tick (a process's repeated sample
	// counts once).
	type pidTick struct {
		pid  uint32
		tick int
	}
	util := map[pidTick]uint32{}
	for _, s := range samples {
		if s.TimeStamp <= since || s.TimeStamp > newest {
			continue
		}
		i := sort.Search(len(ticks), func(i int) bool { return ticks[i] >= s.TimeStamp })
		if length[i] == 0 {
			continue
		}
		k := pidTick{s.Pid, i}
		util[k] = max(util[k], min(s.SmUtil, 100))
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	resolved := map[uint32]string{}
	var errs []error
	perClient := map[string]map[int]uint32{}
	for k, u := range util {
		key, seen := resolved[k.pid]
		if !seen {
			var ok bool
			key, ok, err = m.opts.Resolver.Resolve(ctx, k.pid)
			if err != nil {
				errs = append(errs, fmt.Errorf("pid %d: %w", k.pid, err))
			}
			if err != nil || !ok || !want[key] {
				key = ""
			}
			resolved[k.pid] = key
		}
		if key == "" {
			continue
		}
		if perClient[key] == nil {
			perClient[key] = map[int]uint32{}
		}
		perClient[key][k.tick] = min(100, perClient[key][k.tick]+u)
	}
	out.Busy = make(map[string]time.Duration, len(perClient))
	for key, ticksUtil := range perClient {
		for i, u := range ticksUtil {
			out.Busy[key] += time.Duration(length[i]) * time.Microsecond * time.Duration(u) / 100
		}
	}
	if len(errs) > 0 {
		// A process that cannot be examined leaves its client
		// under-measured this time; the rest stand.
		m.opts.Logger.DebugContext(ctx, "nvml meter: some processes could not be resolved", "gpu", uuid, "err", errors.Join(errs...))
	}
	return out, nil
}

// deviceTicks returns the GPU's sampling ticks newer than lastTick, oldest
// first, from its utilisation samples. A GPU without them is marked noTicks
// (logged once) and has none.
func (m *Meter) deviceTicks(ctx context.Context, g *gpuState, uuid string) ([]uint64, error) {
	_, samples, ret := g.dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, g.lastTick)
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		return nil, nil
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		g.noTicks = true
		m.opts.Logger.InfoContext(ctx, "nvml meter: GPU has no utilisation samples; sampling ticks taken from the process samples",
			"gpu", uuid, "nvml", ret.Error())
		return nil, nil
	case ret != nvml.SUCCESS:
		return nil, fmt.Errorf("nvml meter: GPU %s: GetSamples: %w", uuid, ret)
	}
	seen := map[uint64]bool{}
	var ticks []uint64
	for _, s := range samples {
		if s.TimeStamp > g.lastTick && !seen[s.TimeStamp] {
			seen[s.TimeStamp] = true
			ticks = append(ticks, s.TimeStamp)
		}
	}
	slices.Sort(ticks)
	return ticks, nil
}

// distinct returns the distinct timestamps of the samples newer than
// since, oldest first.
func distinct(samples []nvml.ProcessUtilizationSample, since uint64) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for _, s := range samples {
		if s.TimeStamp > since && !seen[s.TimeStamp] {
			seen[s.TimeStamp] = true
			out = append(out, s.TimeStamp)
		}
	}
	slices.Sort(out)
	return out
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
