package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
)

type fakeNode struct{}

func (fakeNode) Inventory() inventory.Node {
	return inventory.Node{Name: "n1", GPUs: []inventory.GPU{
		{UUID: "GPU-a", Index: 0, Model: "H100-SXM", MemoryMiB: 81920, Health: inventory.Healthy},
		{UUID: "GPU-b", Index: 1, Model: "H100-SXM", MemoryMiB: 81920, Health: inventory.Unhealthy},
	}}
}

func (fakeNode) Allocations() []checkpoint.Entry {
	return []checkpoint.Entry{{Key: "tsr-1", Namespace: "ns", Pod: "p", Container: "c", DeviceIDs: []string{"GPU-a::s0"},
		GPUs: []binding.Share{{UUID: "GPU-a", ComputeMilli: 250, ComputeLimitMilli: 500, MemoryMiB: 1024, MemoryLimitMiB: 2048}}}}
}

type fakeUsage struct{}

func (fakeUsage) Usage(context.Context) ([]ContainerMemory, error) {
	return []ContainerMemory{{Key: "tsr-1", GPUUUID: "GPU-a", MemoryUsedBytes: 12345}, {Key: "gone", GPUUUID: "GPU-a", MemoryUsedBytes: 1}}, nil
}

func scrape(t *testing.T, c *Collector) string {
	t.Helper()
	h, err := Handler(c)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestSimulatedSeriesAreLabelledAndContainersCarryTheirShares(t *testing.T) {
	out := scrape(t, NewCollector(fakeNode{}, Simulated{Node: fakeNode{}}, nil, nil))
	for _, want := range []string{
		`tessera_gpu_info{gpu="0",model="H100-SXM",node="n1",source="simulated",uuid="GPU-a"} 1`,
		`tessera_gpu_healthy{gpu="1",node="n1",source="simulated",uuid="GPU-b"} 0`,
		`tessera_gpu_utilization_ratio{gpu="0",node="n1",source="simulated",uuid="GPU-a"} 0.25`,
		`tessera_gpu_memory_total_bytes{gpu="0",node="n1",source="simulated",uuid="GPU-a"} 8.589934592e+10`,
		`tessera_gpu_compute_guaranteed_ratio{gpu="0",node="n1",source="simulated",uuid="GPU-a"} 0.25`,
		// No container on GPU-b: its sum reads 0 (a freed GPU must not
		// vanish from the series).
		`tessera_gpu_compute_guaranteed_ratio{gpu="1",node="n1",source="simulated",uuid="GPU-b"} 0`,
		`tessera_container_gpu_memory_limit_bytes{container="c",gpu="0",namespace="ns",node="n1",pod="p",uuid="GPU-a"} 2.147483648e+09`,
		`tessera_container_gpu_compute_limit_ratio{container="c",gpu="0",namespace="ns",node="n1",pod="p",uuid="GPU-a"} 0.5`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(out, "tessera_container_gpu_memory_used_bytes{") {
		t.Errorf("usage reported without a usage source")
	}
}

func TestUsageComesOnlyFromTheUsageSource(t *testing.T) {
	out := scrape(t, NewCollector(fakeNode{}, Simulated{Node: fakeNode{}}, fakeUsage{}, nil))
	want := `tessera_container_gpu_memory_used_bytes{container="c",gpu="0",namespace="ns",node="n1",pod="p",uuid="GPU-a"} 12345`
	if !strings.Contains(out, want) || strings.Count(out, "tessera_container_gpu_memory_used_bytes{") != 1 {
		t.Errorf("usage series wrong:\n%s", out)
	}
}

type fakeArbiter struct{ fakeUsage }

func (fakeArbiter) ComputeShares() []ContainerCompute {
	busy := int64(30)
	return []ContainerCompute{{Key: "tsr-1", GPUUUID: "GPU-a", ShareMilli: 400, DemandMilli: 600,
		Use: gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy}, Idle: true}, {Key: "gone", GPUUUID: "GPU-a", ShareMilli: 1}}
}

func TestComputeSharesComeFromTheArbiter(t *testing.T) {
	out := scrape(t, NewCollector(fakeNode{}, Simulated{Node: fakeNode{}}, fakeArbiter{}, nil))
	for _, want := range []string{
		`tessera_container_gpu_compute_share_ratio{container="c",gpu="0",measured="false",namespace="ns",node="n1",pod="p",uuid="GPU-a"} 0.4`,
		`tessera_container_gpu_compute_demand_ratio{container="c",gpu="0",namespace="ns",node="n1",pod="p",uuid="GPU-a"} 0.6`,
		// The arbiter's use window and idle mark, labelled simulated.
		`tessera_container_gpu_busy_ratio{container="c",gpu="0",namespace="ns",node="n1",pod="p",source="simulated",uuid="GPU-a"} 0.03`,
		`tessera_container_gpu_idle{container="c",gpu="0",namespace="ns",node="n1",pod="p",source="simulated",uuid="GPU-a"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Count(out, "tessera_container_gpu_compute_share_ratio{") != 1 {
		t.Errorf("a share of an unknown container was exported:\n%s", out)
	}
	if out := scrape(t, NewCollector(fakeNode{}, Simulated{Node: fakeNode{}}, fakeUsage{}, nil)); strings.Contains(out, "compute_share_ratio{") {
		t.Error("compute shares exported without an arbiter")
	}
}

func TestNVMLFiguresAndFailures(t *testing.T) {
	dev := &mock.Device{
		GetUUIDFunc:             func() (string, nvml.Return) { return "GPU-a", nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 42}, nvml.SUCCESS },
		GetMemoryInfoFunc:       func() (nvml.Memory, nvml.Return) { return nvml.Memory{Used: 10, Total: 100}, nvml.SUCCESS },
		GetTemperatureFunc:      func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 61, nvml.SUCCESS },
		GetPowerUsageFunc:       func() (uint32, nvml.Return) { return 250500, nvml.SUCCESS },
	}
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		ErrorStringFunc:    func(r nvml.Return) string { return "err" },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i == 1 {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return dev, nvml.SUCCESS
		},
	}
	stats, err := NVML{Lib: lib}.Stats(context.Background())
	if err == nil || !strings.Contains(err.Error(), "GPU 1") {
		t.Errorf("error = %v, want one naming GPU 1", err)
	}
	want := GPUStat{UUID: "GPU-a", UtilizationRatio: 0.42, MemoryUsedBytes: 10, MemoryTotalBytes: 100, TemperatureC: 61, PowerW: 250.5}
	if len(stats) != 1 || stats[0] != want {
		t.Errorf("stats = %+v, want [%+v]", stats, want)
	}
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	if _, err := (NVML{Lib: lib}).Stats(context.Background()); err == nil {
		t.Errorf("Stats without a driver succeeded")
	}
	out := scrape(t, NewCollector(fakeNode{}, NVML{Lib: lib}, nil, nil))
	if !strings.Contains(out, `tessera_agent_metrics_source_up{node="n1",source="nvml"} 0`) {
		t.Errorf("failed scrape not reported")
	}
}
