package nvmlgpu

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/inventory"
)

// HealthEvent reports that a GPU's health changed.
type HealthEvent struct {
	// UUID and Index name the GPU (the physical GPU, also for MIG devices).
	UUID  string
	Index int
	// Health is the GPU's new health, inventory.Unhealthy for every event
	// WatchHealth reports today.
	Health inventory.Health
	// Reason explains it ("XID 79: GPU has fallen off the bus").
	Reason string
	// XID is the driver's error number, 0 for events that are no XID.
	XID uint64
}

// watchedEvents are the NVML events WatchHealth registers for. Corrected
// (single-bit) ECC errors are left out: they do not make a GPU unhealthy,
// and a high rate of them comes as XID 92.
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// watched is a GPU registered with the event set.
type watched struct {
	uuid  string
	index int
}

// WatchHealth registers every GPU that supports it for critical XID and
// double-bit ECC events and calls fn with each event that makes a GPU
// unhealthy (see xidHealth for which XIDs do), until ctx is done; it then
// returns nil. It blocks, calling fn from its own goroutine, so run it in a
// goroutine of its own. GPUs that cannot report these events are skipped.
// When NVML says a GPU is lost it reports every GPU Unhealthy and returns an
// error. Without a usable NVML the error wraps ErrUnavailable.
func (s *Source) WatchHealth(ctx context.Context, fn func(HealthEvent)) error {
	if err := s.init(); err != nil {
		return fmt.Errorf("watch GPU health: %w", err)
	}
	defer s.shutdown()
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("watch GPU health: EventSetCreate: %w", ret)
	}
	defer func() {
		if ret := set.Free(); ret != nvml.SUCCESS {
			slog.Debug("nvml event set free failed", "error", ret.Error())
		}
	}()
	gpus, err := s.register(set)
	if err != nil {
		return fmt.Errorf("watch GPU health: %w", err)
	}
	if err := s.wait(ctx, set, gpus, fn); err != nil {
		return fmt.Errorf("watch GPU health: %w", err)
	}
	return nil
}

// register adds every GPU that supports the watched events to set.
func (s *Source) register(set nvml.EventSet) (map[nvml.Device]watched, error) {
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("DeviceGetCount: %w", ret)
	}
	gpus := make(map[nvml.Device]watched, count)
	for i := range count {
		where := gpuAt(i)
		dev, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, callErr(where, "DeviceGetHandleByIndex", ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, callErr(where, "GetUUID", ret)
		}
		supported, ok, err := get(where, "GetSupportedEventTypes", dev.GetSupportedEventTypes)
		if err != nil {
			return nil, err
		}
		mask := supported & watchedEvents
		if !ok || mask == 0 {
			slog.Warn("GPU cannot report health events; not watched", "index", i, "uuid", uuid)
			continue
		}
		ret = dev.RegisterEvents(mask, set)
		if unsupported(ret) {
			slog.Warn("GPU cannot report health events; not watched", "index", i, "uuid", uuid)
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, callErr(where, "RegisterEvents", ret)
		}
		gpus[dev] = watched{uuid: uuid, index: i}
	}
	return gpus, nil
}

// wait delivers events from set to fn until ctx is done.
func (s *Source) wait(ctx context.Context, set nvml.EventSet, gpus map[nvml.Device]watched, fn func(HealthEvent)) error {
	timeout := uint32(max(s.waitTimeout, time.Millisecond) / time.Millisecond)
	for ctx.Err() == nil {
		e, ret := set.Wait(timeout)
		switch {
		case ret == nvml.ERROR_TIMEOUT:
			continue
		case ret == nvml.ERROR_GPU_IS_LOST:
			// NVML does not say which GPU; all of them are suspect.
			for _, w := range gpus {
				fn(HealthEvent{UUID: w.uuid, Index: w.index, Health: inventory.Unhealthy, Reason: "NVML: GPU is lost"})
			}
			return fmt.Errorf("EventSetWait: %w", ret)
		case ret != nvml.SUCCESS:
			return fmt.Errorf("EventSetWait: %w", ret)
		}
		ev, ok := healthEvent(e)
		if !ok {
			continue
		}
		w, known := lookup(gpus, e.Device)
		if !known {
			slog.Warn("health event for a GPU that is not watched", "reason", ev.Reason)
			continue
		}
		ev.UUID, ev.Index = w.uuid, w.index
		fn(ev)
	}
	return nil
}

// healthEvent turns an NVML event into a HealthEvent without its GPU, or
// reports false when the event does not change the GPU's health.
func healthEvent(e nvml.EventData) (HealthEvent, bool) {
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		health, reason, ok := xidHealth(e.EventData)
		return HealthEvent{Health: health, Reason: reason, XID: e.EventData}, ok
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		return HealthEvent{Health: inventory.Unhealthy, Reason: "double-bit ECC error"}, true
	default:
		return HealthEvent{}, false
	}
}

// lookup finds the watched GPU an event's device handle names: by handle
// (NVML hands out one handle per device), else by UUID.
func lookup(gpus map[nvml.Device]watched, dev nvml.Device) (watched, bool) {
	if dev == nil {
		return watched{}, false
	}
	if w, ok := gpus[dev]; ok {
		return w, true
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return watched{}, false
	}
	for _, w := range gpus {
		if w.uuid == uuid {
			return w, true
		}
	}
	return watched{}, false
}
