package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads GPU figures from the driver. Init and Shutdown bracket every
// scrape (NVML counts them), so a driver reload is picked up.
type NVML struct{ Lib nvml.Interface }

// NewNVML returns an NVML reader of the system library.
func NewNVML() NVML { return NVML{Lib: nvml.New()} }

// Source implements GPUStats.
func (NVML) Source() string { return "nvml" }

// Stats implements GPUStats. A GPU whose figures cannot be read is left out.
func (n NVML) Stats(ctx context.Context) ([]GPUStat, error) {
	if ret := n.Lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml init: %s", n.Lib.ErrorString(ret))
	}
	defer n.Lib.Shutdown()
	count, ret := n.Lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %s", n.Lib.ErrorString(ret))
	}
	var out []GPUStat
	var errs []error
	for i := range count {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		s, err := n.device(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

func (n NVML) device(i int) (GPUStat, error) {
	d, ret := n.Lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return GPUStat{}, fmt.Errorf("GPU %d: handle: %s", i, n.Lib.ErrorString(ret))
	}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return GPUStat{}, fmt.Errorf("GPU %d: uuid: %s", i, n.Lib.ErrorString(ret))
	}
	s := GPUStat{UUID: uuid}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		s.UtilizationRatio = float64(u.Gpu) / 100
	}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.MemoryUsedBytes, s.MemoryTotalBytes = float64(m.Used), float64(m.Total)
	}
	if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		s.TemperatureC = float64(t)
	}
	if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
		s.PowerW = float64(p) / 1000
	}
	return s, nil
}
