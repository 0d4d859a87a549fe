package nvmlmeter

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/arbiter"
)

const gpuUUID = "GPU-00000000-1111-2222-3333-444444444444"

// testNow is the fake wall clock; sample timestamps are µs since the epoch.
func testNow() time.Time { return time.Unix(1_700_000_000, 0) }

func us(d time.Duration) uint64 { return uint64(testNow().Add(d).UnixMicro()) }

const ms = time.Millisecond

// fakeGPU is a mock device with the sampling ticks (device utilisation
// samples) and process samples the test sets. Like NVML, each call answers
// NOT_FOUND when nothing is newer than the timestamp passed; unlike it, it
// then hands back its whole buffer, so the meter must drop what it has
// seen. It records the timestamps passed.
type fakeGPU struct {
	dev       *mock.Device
	ticks     []time.Duration
	samples   []nvml.ProcessUtilizationSample
	tickRet   nvml.Return
	procRet   nvml.Return
	tickSince []uint64
	procSince []uint64
}

func newFakeGPU() *fakeGPU {
	g := &fakeGPU{dev: &mock.Device{}, tickRet: nvml.SUCCESS, procRet: nvml.SUCCESS}
	g.dev.GetSamplesFunc = func(typ nvml.SamplingType, since uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		if typ != nvml.GPU_UTILIZATION_SAMPLES {
			return 0, nil, nvml.ERROR_INVALID_ARGUMENT
		}
		g.tickSince = append(g.tickSince, since)
		if g.tickRet != nvml.SUCCESS {
			return 0, nil, g.tickRet
		}
		var out []nvml.Sample
		newer := false
		for _, t := range g.ticks {
			out = append(out, nvml.Sample{TimeStamp: us(t), SampleValue: [8]byte{99}})
			newer = newer || us(t) > since
		}
		if !newer {
			return 0, nil, nvml.ERROR_NOT_FOUND
		}
		return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
	}
	g.dev.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		g.procSince = append(g.procSince, since)
		if g.procRet != nvml.SUCCESS {
			return nil, g.procRet
		}
		newer := false
		for _, s := range g.samples {
			newer = newer || s.TimeStamp > since
		}
		if !newer {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return append([]nvml.ProcessUtilizationSample(nil), g.samples...), nvml.SUCCESS
	}
	return g
}

func fakeNVML(gpus map[string]*fakeGPU) *mock.Interface {
	lib := &mock.Interface{}
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		if g, ok := gpus[uuid]; ok {
			return g.dev, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return lib
}

// pidKeys resolves fixed PIDs.
type pidKeys map[uint32]string

func (p pidKeys) Resolve(_ context.Context, pid uint32) (string, bool, error) {
	if pid == 666 {
		return "", false, errors.New("permission denied")
	}
	k, ok := p[pid]
	return k, ok, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openMeter(t *testing.T, lib nvml.Interface, r Resolver, maxAge time.Duration) *Meter {
	t.Helper()
	m, err := Open(lib, Options{Resolver: r, Now: testNow, Logger: quiet(), MaxAge: maxAge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func sample(pid uint32, at time.Duration, sm uint32) nvml.ProcessUtilizationSample {
	return nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: us(at), SmUtil: sm, MemUtil: 7}
}

func read(t *testing.T, m *Meter, keys ...string) arbiter.Reading {
	t.Helper()
	r, err := m.Read(context.Background(), gpuUUID, keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sameReading(got arbiter.Reading, span time.Duration, busy map[string]time.Duration) bool {
	if got.Span != span || len(got.Busy) != len(busy) {
		return false
	}
	for k, v := range busy {
		if w, ok := got.Busy[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// every returns n ticks 200 ms apart, the first 200 ms after at.
func every(at time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = at + time.Duration(i+1)*200*ms
	}
	return out
}

// TestRead sets a baseline tick at -10 s, reads once (the baseline),
// then adds ticks and process samples and checks the second reading.
func TestRead(t *testing.T) {
	const base = -10 * time.Second
	ticks := every(base, 5) // -9.8 s … -9.0 s: 1 s
	at := func(i int) time.Duration { return ticks[i] }
	// NVML's time slicing of two busy processes: each tick goes
	// wholly to one of them (15 ticks, a in 7, b in 8).
	const pattern = "abbababbaabbaab"
	two := every(base, len(pattern))
	var alternating []nvml.ProcessUtilizationSample
	for i, c := range pattern {
		alternating = append(alternating, sample(map[rune]uint32{'a': 10, 'b': 20}[c], two[i], 99))
	}
	cases := []struct {
		name    string
		ticks   []time.Duration
		samples []nvml.ProcessUtilizationSample
		procRet nvml.Return
		keys    []string
		span    time.Duration
		want    map[string]time.Duration
	}{
		{"one process alone at full speed", ticks, []nvml.ProcessUtilizationSample{
			sample(10, at(0), 99), sample(10, at(1), 99), sample(10, at(2), 99), sample(10, at(3), 99), sample(10, at(4), 99)},
			nvml.SUCCESS, []string{"a"}, time.Second, map[string]time.Duration{"a": 990 * ms}},
		{"one process throttled to 32%", ticks, []nvml.ProcessUtilizationSample{
			sample(10, at(0), 32), sample(10, at(1), 32), sample(10, at(2), 32), sample(10, at(3), 32), sample(10, at(4), 32)},
			nvml.SUCCESS, []string{"a"}, time.Second, map[string]time.Duration{"a": 320 * ms}},
		{"two processes time-slicing: one sampled per tick", two, alternating,
			nvml.SUCCESS, []string{"a", "b"}, 3 * time.Second, map[string]time.Duration{"a": 7 * 198 * ms, "b": 8 * 198 * ms}},
		{"idle ticks: no process samples", ticks, nil,
			nvml.ERROR_NOT_FOUND, []string{"a"}, time.Second, map[string]time.Duration{}},
		{"a client's processes summed, capped at the tick", ticks[:1], []nvml.ProcessUtilizationSample{
			sample(10, at(0), 70), sample(11, at(0), 60), sample(20, at(0), 30), sample(21, at(0), 20)},
			nvml.SUCCESS, []string{"a", "b"}, 200 * ms, map[string]time.Duration{"a": 200 * ms, "b": 100 * ms}},
		{"a bogus value is capped", ticks[:1], []nvml.ProcessUtilizationSample{sample(10, at(0), 250)},
			nvml.SUCCESS, []string{"a"}, 200 * ms, map[string]time.Duration{"a": 200 * ms}},
		{"other clients, unknown and unresolvable processes left out", ticks[:1], []nvml.ProcessUtilizationSample{
			sample(10, at(0), 40), sample(30, at(0), 50), sample(40, at(0), 60), sample(666, at(0), 70)},
			nvml.SUCCESS, []string{"a", "b"}, 200 * ms, map[string]time.Duration{"a": 80 * ms}},
		{"a repeated sample counts once", ticks[:1], []nvml.ProcessUtilizationSample{sample(10, at(0), 40), sample(10, at(0), 40)},
			nvml.SUCCESS, []string{"a"}, 200 * ms, map[string]time.Duration{"a": 80 * ms}},
		{"ticks of unequal length", []time.Duration{base + 100*ms, base + 400*ms}, []nvml.ProcessUtilizationSample{
			sample(10, base+100*ms, 50), sample(10, base+400*ms, 50)},
			nvml.SUCCESS, []string{"a"}, 400 * ms, map[string]time.Duration{"a": 200 * ms}},
		{"a sample just before a tick belongs to it", ticks[:2], []nvml.ProcessUtilizationSample{
			sample(10, at(1)-time.Microsecond, 50)},
			nvml.SUCCESS, []string{"a"}, 400 * ms, map[string]time.Duration{"a": 100 * ms}},
		{"samples at or before the baseline are old", ticks[:1], []nvml.ProcessUtilizationSample{
			sample(10, base, 99), sample(10, base-200*ms, 99), sample(10, at(0), 10)},
			nvml.SUCCESS, []string{"a"}, 200 * ms, map[string]time.Duration{"a": 20 * ms}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU()
			m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a", 11: "a", 20: "b", 21: "b", 30: "c"}, time.Hour)
			g.ticks = []time.Duration{base}
			if r := read(t, m, c.keys...); r.Span != 0 || len(r.Busy) != 0 {
				t.Fatalf("first reading %+v, want the baseline only", r)
			}
			g.ticks = append(g.ticks, c.ticks...)
			g.samples, g.procRet = c.samples, c.procRet
			if r := read(t, m, c.keys...); !sameReading(r, c.span, c.want) {
				t.Fatalf("reading %+v, want span %v busy %v", r, c.span, c.want)
			}
		})
	}
}

// TestReadFollowsTheTicks reads a GPU over several calls: the baseline,
// nothing between ticks, a sample newer than the newest tick waiting for
// its tick, and the timestamps passed to NVML.
func TestReadFollowsTheTicks(t *testing.T) {
	g := newFakeGPU()
	m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a", 20: "b"}, 0)
	g.ticks = []time.Duration{-900 * ms, -700 * ms}
	g.samples = []nvml.ProcessUtilizationSample{sample(10, -700*ms, 99)}
	if r := read(t, m, "a", "b"); r.Span != 0 || len(r.Busy) != 0 {
		t.Fatalf("first reading %+v, want nothing: the newest tick is the baseline", r)
	}
	if len(g.procSince) != 0 {
		t.Errorf("the baseline asked for process samples")
	}
	// No new tick: nothing, and no process samples asked for.
	if r := read(t, m, "a", "b"); r.Span != 0 || len(r.Busy) != 0 {
		t.Fatalf("between ticks: %+v, want nothing", r)
	}
	if want := []uint64{0, us(-700 * ms)}; !slices.Equal(g.tickSince, want) || len(g.procSince) != 0 {
		t.Errorf("asked for ticks since %v and samples since %v, want %v and none", g.tickSince, g.procSince, want)
	}
	// A tick: b's; a's sample of the next tick is already there.
	g.ticks = append(g.ticks, -500*ms)
	g.samples = append(g.samples, sample(20, -500*ms, 99), sample(10, -300*ms, 50))
	if r := read(t, m, "a", "b"); !sameReading(r, 200*ms, map[string]time.Duration{"b": 198 * ms}) {
		t.Fatalf("after one tick: %+v, want b busy 198ms of 200ms", r)
	}
	g.ticks = append(g.ticks, -300*ms)
	if r := read(t, m, "a", "b"); !sameReading(r, 200*ms, map[string]time.Duration{"a": 100 * ms}) {
		t.Fatalf("after the next tick: %+v, want a's waiting sample, 100ms of 200ms", r)
	}
	if want := []uint64{us(-700 * ms), us(-500 * ms)}; !slices.Equal(g.procSince, want) {
		t.Errorf("asked for samples since %v, want %v", g.procSince, want)
	}
}

// TestReadAfterAPause skips ticks older than MaxAge (1 s) and lets the first
// one counted reach back only to MaxAge ago.
func TestReadAfterAPause(t *testing.T) {
	g := newFakeGPU()
	m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a"}, 0)
	g.ticks = []time.Duration{-time.Minute}
	read(t, m, "a")
	g.ticks = append(g.ticks, -2*time.Second, -900*ms, -700*ms)
	g.samples = []nvml.ProcessUtilizationSample{sample(10, -2*time.Second, 99), sample(10, -900*ms, 50), sample(10, -700*ms, 50)}
	if r := read(t, m, "a"); !sameReading(r, 300*ms, map[string]time.Duration{"a": 150 * ms}) {
		t.Fatalf("after a pause: %+v, want span 300ms (100ms of the -900ms tick, the -700ms one), a 150ms", r)
	}
	if want := us(-time.Second); len(g.procSince) != 1 || g.procSince[0] != want {
		t.Errorf("asked for samples since %v, want now - MaxAge = %d", g.procSince, want)
	}
}

// TestReadWithoutDeviceSamples falls back to the process samples'
// timestamps as ticks when NVML has no device utilisation samples.
func TestReadWithoutDeviceSamples(t *testing.T) {
	g := newFakeGPU()
	g.tickRet = nvml.ERROR_NOT_SUPPORTED
	m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a", 20: "b"}, 0)
	// Nothing yet: no baseline.
	g.procRet = nvml.ERROR_NOT_FOUND
	if r := read(t, m, "a", "b"); r.Span != 0 {
		t.Fatalf("no samples: %+v", r)
	}
	g.procRet = nvml.SUCCESS
	g.samples = []nvml.ProcessUtilizationSample{sample(10, -1500*ms, 99), sample(10, -900*ms, 99)}
	if r := read(t, m, "a", "b"); r.Span != 0 || len(r.Busy) != 0 {
		t.Fatalf("first reading %+v, want the baseline only", r)
	}
	// Two ticks: b, then a after a gap (a tick with no samples).
	g.samples = append(g.samples, sample(20, -700*ms, 99), sample(10, -300*ms, 50))
	if r := read(t, m, "a", "b"); !sameReading(r, 600*ms, map[string]time.Duration{"a": 200 * ms, "b": 198 * ms}) {
		t.Fatalf("reading %+v, want span 600ms, b 198ms, a 200ms (half of the 400ms gap)", r)
	}
	// After a long idle gap, the tick covers at most MaxAge.
	g.samples = append(g.samples, sample(10, 5*time.Second, 50))
	m.opts.Now = func() time.Time { return testNow().Add(5 * time.Second) }
	if r := read(t, m, "a", "b"); !sameReading(r, time.Second, map[string]time.Duration{"a": 500 * ms}) {
		t.Fatalf("after an idle gap: %+v, want span 1s (MaxAge), a 500ms", r)
	}
	if len(g.tickSince) != 1 {
		t.Errorf("device samples asked for %d times, want once", len(g.tickSince))
	}
}

func TestReadNVMLAnswers(t *testing.T) {
	cases := []struct {
		name             string
		tickRet, procRet nvml.Return
		wantErr          nvml.Return
		// again is whether the next reading asks NVML again.
		again bool
	}{
		{"process samples not supported (MIG)", nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, false},
		{"no process samples on the driver", nvml.SUCCESS, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.SUCCESS, false},
		{"no sample of either kind (MIG)", nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, false},
		{"GPU lost", nvml.SUCCESS, nvml.ERROR_GPU_IS_LOST, nvml.ERROR_GPU_IS_LOST, true},
		{"unknown", nvml.SUCCESS, nvml.ERROR_UNKNOWN, nvml.ERROR_UNKNOWN, true},
		{"GPU lost to GetSamples", nvml.ERROR_GPU_IS_LOST, nvml.SUCCESS, nvml.ERROR_GPU_IS_LOST, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU()
			g.ticks = []time.Duration{-900 * ms}
			g.samples = []nvml.ProcessUtilizationSample{sample(10, -900*ms, 50), sample(10, -700*ms, 50), sample(10, -500*ms, 50)}
			m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a"}, 0)
			read(t, m, "a") // the baseline
			g.ticks = append(g.ticks, -700*ms)
			g.tickRet, g.procRet = c.tickRet, c.procRet
			calls := func() int { return len(g.tickSince) + len(g.procSince) }
			var before int
			for i := range 2 {
				if i == 1 {
					before = calls()
					g.ticks = append(g.ticks, -500*ms)
				}
				r, err := m.Read(context.Background(), gpuUUID, []string{"a"})
				if c.wantErr != nvml.SUCCESS {
					if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), gpuUUID) {
						t.Fatalf("err = %v, want one wrapping %v and naming the GPU", err, c.wantErr)
					}
					continue
				}
				if err != nil || r.Span != 0 || len(r.Busy) != 0 {
					t.Fatalf("reading %+v, %v; want empty, nil", r, err)
				}
			}
			if asked := calls() > before; asked != c.again {
				t.Errorf("NVML asked again: %v, want %v", asked, c.again)
			}
		})
	}
}

func TestReadUnknownGPU(t *testing.T) {
	m := openMeter(t, fakeNVML(nil), pidKeys{}, 0)
	_, err := m.Read(context.Background(), "GPU-gone", []string{"a"})
	if !errors.Is(err, nvml.ERROR_NOT_FOUND) || !strings.Contains(err.Error(), "GPU-gone") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpen(t *testing.T) {
	lib := fakeNVML(nil)
	if _, err := Open(lib, Options{}); err == nil || !strings.Contains(err.Error(), "resolver: must be set") {
		t.Errorf("no resolver: %v", err)
	}
	if _, err := Open(lib, Options{Resolver: pidKeys{}, MaxAge: time.Microsecond}); err == nil || !strings.Contains(err.Error(), "maxAge") {
		t.Errorf("bad maxAge: %v", err)
	}
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	if _, err := Open(lib, Options{Resolver: pidKeys{}}); !errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Errorf("no NVML: %v", err)
	}
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	m, err := Open(lib, Options{Resolver: pidKeys{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
}
