package nvmlgpu

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/inventory"
)

// eventQueue is a fake event set: Wait hands out the queued results, then
// times out; drained closes once all were handed out.
type eventQueue struct {
	mu      sync.Mutex
	queue   []waitResult
	drained chan struct{}
	freed   bool
}

type waitResult struct {
	data nvml.EventData
	ret  nvml.Return
}

func newEventQueue(results ...waitResult) (*eventQueue, *mock.EventSet) {
	q := &eventQueue{queue: results, drained: make(chan struct{})}
	set := &mock.EventSet{}
	set.WaitFunc = func(uint32) (nvml.EventData, nvml.Return) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.queue) == 0 {
			select {
			case <-q.drained:
			default:
				close(q.drained)
			}
			time.Sleep(time.Millisecond)
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		r := q.queue[0]
		q.queue = q.queue[1:]
		return r.data, r.ret
	}
	set.FreeFunc = func() nvml.Return {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.freed = true
		return nvml.SUCCESS
	}
	return q, set
}

// watchable makes d support and accept event registration.
func watchable(d *mock.Device, supported uint64) {
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return supported, nvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

// fakeEvent is an event on GPU gpu, or a bare return code when typ is 0.
type fakeEvent struct {
	gpu  int
	typ  uint64
	data uint64
	ret  nvml.Return
}

func xidOn(gpu int, code uint64) fakeEvent {
	return fakeEvent{gpu: gpu, typ: nvml.EventTypeXidCriticalError, data: code}
}

func TestWatchHealth(t *testing.T) {
	unhealthy := func(i int, code uint64, reason string) HealthEvent {
		return HealthEvent{UUID: fakeUUID(i), Index: i, Health: inventory.Unhealthy, Reason: reason, XID: code}
	}
	timeout := fakeEvent{ret: nvml.ERROR_TIMEOUT}
	tests := []struct {
		name   string
		events []fakeEvent
		want   []HealthEvent
	}{
		{"xid 79", []fakeEvent{xidOn(1, 79)}, []HealthEvent{unhealthy(1, 79, "XID 79: GPU has fallen off the bus")}},
		{"xid 13 is the application's", []fakeEvent{xidOn(0, 13)}, nil},
		{"application xids", []fakeEvent{xidOn(0, 31), xidOn(0, 43), xidOn(1, 45), xidOn(1, 68), xidOn(0, 109)}, nil},
		{"critical xids", []fakeEvent{xidOn(0, 48), xidOn(1, 95), xidOn(0, 119)}, []HealthEvent{
			unhealthy(0, 48, "XID 48: double-bit ECC error"),
			unhealthy(1, 95, "XID 95: uncontained ECC error"),
			unhealthy(0, 119, "XID 119: GSP RPC timeout"),
		}},
		{"unknown xid", []fakeEvent{xidOn(0, 999)}, []HealthEvent{unhealthy(0, 999, "XID 999: critical error")}},
		{"double-bit ecc", []fakeEvent{{gpu: 1, typ: nvml.EventTypeDoubleBitEccError}},
			[]HealthEvent{unhealthy(1, 0, "double-bit ECC error")}},
		{"other events", []fakeEvent{{gpu: 0, typ: nvml.EventTypePState}, {gpu: 1, typ: nvml.EventTypeSingleBitEccError}}, nil},
		{"timeouts between", []fakeEvent{timeout, xidOn(0, 13), timeout, xidOn(0, 79)},
			[]HealthEvent{unhealthy(0, 79, "XID 79: GPU has fallen off the bus")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs := []*mock.Device{fakeDevice(0), fakeDevice(1)}
			watchable(devs[0], nvml.EventTypeAll)
			watchable(devs[1], nvml.EventTypeXidCriticalError)
			var results []waitResult
			for _, e := range tt.events {
				if e.typ == 0 {
					results = append(results, waitResult{ret: e.ret})
					continue
				}
				results = append(results, waitResult{data: nvml.EventData{Device: devs[e.gpu], EventType: e.typ, EventData: e.data}, ret: nvml.SUCCESS})
			}
			q, set := newEventQueue(results...)
			lib := fakeLib(devs...)
			lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []HealthEvent
			done := make(chan error, 1)
			go func() { done <- newTestSource(lib).WatchHealth(ctx, func(e HealthEvent) { got = append(got, e) }) }()
			select {
			case <-q.drained:
			case err := <-done:
				t.Fatalf("WatchHealth returned early: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("events not consumed")
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("WatchHealth: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("WatchHealth did not stop when its context was cancelled")
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %+v\nwant %+v", got, tt.want)
			}
			if !q.freed || len(lib.ShutdownCalls()) != 1 {
				t.Errorf("event set freed %v, Shutdown calls %d", q.freed, len(lib.ShutdownCalls()))
			}
			if calls := devs[0].RegisterEventsCalls(); len(calls) != 1 || calls[0].V != watchedEvents {
				t.Errorf("GPU 0 registered %+v, want mask %d", calls, watchedEvents)
			}
			if calls := devs[1].RegisterEventsCalls(); len(calls) != 1 || calls[0].V != nvml.EventTypeXidCriticalError {
				t.Errorf("GPU 1 registered %+v, want XID only", calls)
			}
		})
	}
}

func TestWatchHealthSkipsUnsupportedGPUs(t *testing.T) {
	d0, d1, d2 := fakeDevice(0), fakeDevice(1), fakeDevice(2)
	d0.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	watchable(d1, nvml.EventTypePState) // nothing watched is supported
	watchable(d2, nvml.EventTypeAll)
	d2.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	_, set := newEventQueue()
	lib := fakeLib(d0, d1, d2)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := newTestSource(lib).WatchHealth(ctx, func(HealthEvent) { t.Error("unexpected event") }); err != nil {
		t.Fatalf("WatchHealth: %v", err)
	}
}

func TestWatchHealthGPULost(t *testing.T) {
	d0, d1 := fakeDevice(0), fakeDevice(1)
	watchable(d0, nvml.EventTypeAll)
	watchable(d1, nvml.EventTypeAll)
	_, set := newEventQueue(waitResult{ret: nvml.ERROR_GPU_IS_LOST})
	lib := fakeLib(d0, d1)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	seen := map[string]HealthEvent{}
	err := newTestSource(lib).WatchHealth(context.Background(), func(e HealthEvent) { seen[e.UUID] = e })
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Fatalf("err = %v, want ERROR_GPU_IS_LOST", err)
	}
	for i := range 2 {
		if e, ok := seen[fakeUUID(i)]; !ok || e.Health != inventory.Unhealthy || e.Index != i {
			t.Errorf("GPU %d: event %+v, %v; want Unhealthy", i, e, ok)
		}
	}
}

func TestWatchHealthErrors(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(lib *mock.Interface, d *mock.Device)
		want    error
	}{
		{"no driver", func(lib *mock.Interface, _ *mock.Device) {
			lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
			lib.ShutdownFunc = nil
		}, ErrUnavailable},
		{"event set", func(lib *mock.Interface, _ *mock.Device) {
			lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
		}, nvml.ERROR_UNKNOWN},
		{"register", func(_ *mock.Interface, d *mock.Device) {
			d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NO_PERMISSION }
		}, nvml.ERROR_NO_PERMISSION},
		{"wait", func(lib *mock.Interface, _ *mock.Device) {
			_, set := newEventQueue(waitResult{ret: nvml.ERROR_UNKNOWN})
			lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
		}, nvml.ERROR_UNKNOWN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fakeDevice(0)
			watchable(d, nvml.EventTypeAll)
			_, set := newEventQueue()
			lib := fakeLib(d)
			lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
			tt.breakIt(lib, d)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := newTestSource(lib).WatchHealth(ctx, func(HealthEvent) {})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestWatchHealthLocal runs against the real library: without a driver it
// must report ErrUnavailable at once.
func TestWatchHealthLocal(t *testing.T) {
	if _, err := New(nil).Discover(context.Background()); err == nil {
		t.Skip("NVML is available here")
	}
	err := New(nil).WatchHealth(context.Background(), func(HealthEvent) {})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}
