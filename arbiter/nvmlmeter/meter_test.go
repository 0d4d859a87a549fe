package nvmlmeter

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

const gpuUUID = "GPU-00000000-1111-2222-3333-444444444444"

// testNow is the fake wall clock; sample timestamps are µs since the epoch.
func testNow() time.Time { return time.Unix(1_700_000_000, 0) }

func us(d time.Duration) uint64 { return uint64(testNow().Add(d).UnixMicro()) }

// fakeGPU is a mock device whose samples the test sets; it records the
// lastSeenTimestamp of every call.
type fakeGPU struct {
	dev     *mock.Device
	samples []nvml.ProcessUtilizationSample
	ret     nvml.Return
	since   []uint64
}

func newFakeGPU() *fakeGPU {
	g := &fakeGPU{dev: &mock.Device{}, ret: nvml.SUCCESS}
	g.dev.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		g.since = append(g.since, since)
		if g.ret != nvml.SUCCESS {
			return nil, g.ret
		}
		// Like NVML's buffer, hand back everything recent; the meter
		// must drop what it has seen.
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

func openMeter(t *testing.T, lib nvml.Interface, r Resolver) *Meter {
	t.Helper()
	m, err := Open(lib, Options{Resolver: r, Now: testNow, Logger: quiet()})
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

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBusyPerClient(t *testing.T) {
	g := newFakeGPU()
	g.samples = []nvml.ProcessUtilizationSample{
		sample(10, -300*time.Millisecond, 20), // client a, two samples: mean 30 %
		sample(10, -100*time.Millisecond, 40),
		sample(11, -100*time.Millisecond, 15),  // client a's second process: +15 %
		sample(20, -200*time.Millisecond, 70),  // client b
		sample(21, -200*time.Millisecond, 60),  // client b's second process: capped at 1
		sample(30, -100*time.Millisecond, 50),  // client c, not asked for
		sample(40, -100*time.Millisecond, 90),  // no client
		sample(666, -100*time.Millisecond, 90), // cannot be resolved
		sample(50, -100*time.Millisecond, 0),   // client d, idle but measured
		sample(60, -100*time.Millisecond, 250), // client e: a bogus value is capped
	}
	m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}),
		pidKeys{10: "a", 11: "a", 20: "b", 21: "b", 30: "c", 50: "d", 60: "e"})
	got, err := m.Busy(context.Background(), gpuUUID, []string{"a", "b", "d", "e", "f"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": 0.45, "b": 1, "d": 0, "e": 1}
	if len(got) != len(want) {
		t.Fatalf("busy = %v, want %v", got, want)
	}
	for k, v := range want {
		if w, ok := got[k]; !ok || !near(w, v) {
			t.Errorf("busy[%s] = %v (present %v), want %v", k, w, ok, v)
		}
	}
}

func TestBusyTakesOnlyNewSamples(t *testing.T) {
	g := newFakeGPU()
	m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a"})
	busy := func() map[string]float64 {
		t.Helper()
		b, err := m.Busy(context.Background(), gpuUUID, []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// First call: nothing older than MaxAge (1 s) counts.
	g.samples = []nvml.ProcessUtilizationSample{sample(10, -5*time.Second, 100), sample(10, -500*time.Millisecond, 40)}
	if b := busy(); !near(b["a"], 0.4) {
		t.Errorf("first period: busy = %v, want a: 0.4", b)
	}
	if g.since[0] != us(-time.Second) {
		t.Errorf("first call asked from %d, want now - 1s = %d", g.since[0], us(-time.Second))
	}
	// Second call: only the sample after the newest one seen.
	g.samples = append(g.samples, sample(10, -100*time.Millisecond, 80))
	if b := busy(); !near(b["a"], 0.8) {
		t.Errorf("second period: busy = %v, want a: 0.8", b)
	}
	if g.since[1] != us(-500*time.Millisecond) {
		t.Errorf("second call asked from %d, want the newest seen %d", g.since[1], us(-500*time.Millisecond))
	}
	// Nothing new: a is not measured (absent), not idle.
	if b := busy(); len(b) != 0 {
		t.Errorf("no new samples: busy = %v, want none", b)
	}
	if g.since[2] != us(-100*time.Millisecond) {
		t.Errorf("third call asked from %d, want %d", g.since[2], us(-100*time.Millisecond))
	}
}

func TestBusyNVMLAnswers(t *testing.T) {
	cases := []struct {
		name    string
		ret     nvml.Return
		wantErr bool
		// again is whether the next period asks NVML again.
		again bool
	}{
		{"no samples", nvml.ERROR_NOT_FOUND, false, true},
		{"not supported (MIG)", nvml.ERROR_NOT_SUPPORTED, false, false},
		{"old driver", nvml.ERROR_FUNCTION_NOT_FOUND, false, false},
		{"GPU lost", nvml.ERROR_GPU_IS_LOST, true, true},
		{"unknown", nvml.ERROR_UNKNOWN, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU()
			g.ret = c.ret
			m := openMeter(t, fakeNVML(map[string]*fakeGPU{gpuUUID: g}), pidKeys{10: "a"})
			for range 2 {
				b, err := m.Busy(context.Background(), gpuUUID, []string{"a"})
				if c.wantErr {
					if !errors.Is(err, c.ret) || !strings.Contains(err.Error(), gpuUUID) {
						t.Fatalf("err = %v, want one wrapping %v and naming the GPU", err, c.ret)
					}
					continue
				}
				if err != nil || b == nil || len(b) != 0 {
					t.Fatalf("busy = %v, %v; want empty, nil", b, err)
				}
			}
			if want := map[bool]int{true: 2, false: 1}[c.again]; len(g.since) != want {
				t.Errorf("NVML asked %d times, want %d", len(g.since), want)
			}
		})
	}
}

func TestBusyUnknownGPU(t *testing.T) {
	m := openMeter(t, fakeNVML(nil), pidKeys{})
	_, err := m.Busy(context.Background(), "GPU-gone", []string{"a"})
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
