package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// Collector is a prometheus.Collector over the agent's state.
type Collector struct {
	node    Node
	stats   GPUStats
	usage   ContainerUsage
	log     *slog.Logger
	timeout time.Duration
}

// NewCollector returns a collector; usage may be nil (no usage metric).
func NewCollector(node Node, stats GPUStats, usage ContainerUsage, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{node: node, stats: stats, usage: usage, log: log, timeout: 5 * time.Second}
}

var (
	gpuLabels       = []string{"node", "gpu", "uuid", "source"}
	containerLabels = []string{"node", "namespace", "pod", "container", "gpu", "uuid"}

	descInfo      = prometheus.NewDesc("tessera_gpu_info", "A GPU of the node (value 1) with its model.", append(gpuLabels, "model"), nil)
	descHealthy   = prometheus.NewDesc("tessera_gpu_healthy", "1 when the GPU is healthy, 0 when it is not (or unknown).", gpuLabels, nil)
	descUtil      = prometheus.NewDesc("tessera_gpu_utilization_ratio", "Fraction of the last sample period a kernel ran on the GPU, 0 to 1.", gpuLabels, nil)
	descMemUsed   = prometheus.NewDesc("tessera_gpu_memory_used_bytes", "GPU memory in use.", gpuLabels, nil)
	descMemTotal  = prometheus.NewDesc("tessera_gpu_memory_total_bytes", "GPU memory in total.", gpuLabels, nil)
	descTemp      = prometheus.NewDesc("tessera_gpu_temperature_celsius", "GPU core temperature.", gpuLabels, nil)
	descPower     = prometheus.NewDesc("tessera_gpu_power_watts", "GPU power draw.", gpuLabels, nil)
	descGranted   = prometheus.NewDesc("tessera_gpu_compute_guaranteed_ratio", "Sum of the compute guarantees handed to containers on the GPU, 0 to 1.", gpuLabels, nil)
	descCReq      = prometheus.NewDesc("tessera_container_gpu_compute_request_ratio", "Compute guarantee of a container on a GPU, 0 to 1.", containerLabels, nil)
	descCLim      = prometheus.NewDesc("tessera_container_gpu_compute_limit_ratio", "Compute burst limit of a container on a GPU, 0 to 1.", containerLabels, nil)
	descCMemReq   = prometheus.NewDesc("tessera_container_gpu_memory_request_bytes", "GPU memory guaranteed to a container.", containerLabels, nil)
	descCMemLim   = prometheus.NewDesc("tessera_container_gpu_memory_limit_bytes", "GPU memory cap of a container.", containerLabels, nil)
	descCMemUsed  = prometheus.NewDesc("tessera_container_gpu_memory_used_bytes", "GPU memory a container uses, as the node arbiter reports it.", containerLabels, nil)
	descCShare    = prometheus.NewDesc("tessera_container_gpu_compute_share_ratio", "GPU time share the node arbiter gave a container in its last period, 0 to 1 (measured=\"true\" when calibrated by measured utilisation).", append(containerLabels, "measured"), nil)
	descCDemand   = prometheus.NewDesc("tessera_container_gpu_compute_demand_ratio", "GPU time share the node arbiter estimates a container wants, 0 to 1.", containerLabels, nil)
	descCBusy     = prometheus.NewDesc("tessera_container_gpu_busy_ratio", "Part of the GPU's time a container's kernels ran over the node arbiter's last use window, 0 to 1 (source=\"measured\" by NVML, or \"simulated\" from a declared load); absent until a window closed or where nothing meters.", append(containerLabels, "source"), nil)
	descCIdle     = prometheus.NewDesc("tessera_container_gpu_idle", "1 while a container is an idle holder (its busy ratio stayed below the idle threshold for the idle time), else 0; absent where nothing meters.", append(containerLabels, "source"), nil)
	descScrapeErr = prometheus.NewDesc("tessera_agent_metrics_source_up", "1 when the metrics source answered this scrape, 0 when it failed.", []string{"node", "source"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descHealthy, descUtil, descMemUsed, descMemTotal, descTemp, descPower, descGranted, descCReq, descCLim, descCMemReq, descCMemLim, descCMemUsed, descCShare, descCDemand, descCBusy, descCIdle, descScrapeErr} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	inv := c.node.Inventory()
	src := c.stats.Source()
	index := map[string]string{}
	for _, g := range inv.GPUs {
		idx := strconv.Itoa(g.Index)
		index[g.UUID] = idx
		for _, m := range g.MIGInstances {
			if m.UUID != "" {
				index[m.UUID] = idx
			}
		}
		lv := []string{inv.Name, idx, g.UUID, src}
		ch <- gauge(descInfo, 1, append(lv, g.Model)...)
		ch <- gauge(descHealthy, boolf(g.Health == inventory.Healthy), lv...)
	}
	stats, err := c.stats.Stats(ctx)
	ch <- gauge(descScrapeErr, boolf(err == nil), inv.Name, src)
	if err != nil {
		c.log.Debug("GPU stats unavailable", "error", err)
	}
	for _, s := range stats {
		lv := []string{inv.Name, index[s.UUID], s.UUID, src}
		ch <- gauge(descUtil, s.UtilizationRatio, lv...)
		ch <- gauge(descMemUsed, s.MemoryUsedBytes, lv...)
		ch <- gauge(descMemTotal, s.MemoryTotalBytes, lv...)
		ch <- gauge(descTemp, s.TemperatureC, lv...)
		ch <- gauge(descPower, s.PowerW, lv...)
	}
	gpus := make([]string, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		gpus = append(gpus, g.UUID)
	}
	c.collectContainers(ctx, ch, inv.Name, src, index, gpus)
}

// collectContainers reports each container's shares and, per GPU, the sum
// of the guarantees on it: 0 for a GPU no container holds, so that a freed
// GPU reads 0 rather than vanishing from the series.
func (c *Collector) collectContainers(ctx context.Context, ch chan<- prometheus.Metric, node, src string, index map[string]string, gpus []string) {
	granted := map[string]float64{}
	for _, u := range gpus {
		granted[u] = 0
	}
	type cg struct{ key, uuid string }
	who := map[cg][]string{}
	for _, e := range c.node.Allocations() {
		for _, g := range e.GPUs {
			lv := []string{node, e.Namespace, e.Pod, e.Container, index[g.UUID], g.UUID}
			who[cg{e.Key, g.UUID}] = lv
			granted[g.UUID] += float64(g.ComputeMilli) / request.Whole
			ch <- gauge(descCReq, float64(g.ComputeMilli)/request.Whole, lv...)
			ch <- gauge(descCLim, float64(g.ComputeLimitMilli)/request.Whole, lv...)
			ch <- gauge(descCMemReq, float64(g.MemoryMiB<<20), lv...)
			ch <- gauge(descCMemLim, float64(g.MemoryLimitMiB<<20), lv...)
		}
	}
	for uuid, v := range granted {
		ch <- gauge(descGranted, v, node, index[uuid], uuid, src)
	}
	if c.usage == nil {
		return
	}
	usage, err := c.usage.Usage(ctx)
	ch <- gauge(descScrapeErr, boolf(err == nil), node, "arbiter")
	for _, u := range usage {
		if lv, ok := who[cg{u.Key, u.GPUUUID}]; ok {
			ch <- gauge(descCMemUsed, u.MemoryUsedBytes, lv...)
		}
	}
	if cs, ok := c.usage.(ComputeShares); ok {
		for _, s := range cs.ComputeShares() {
			if lv, ok := who[cg{s.Key, s.GPUUUID}]; ok {
				ch <- gauge(descCShare, float64(s.ShareMilli)/request.Whole, append(append([]string(nil), lv...), fmt.Sprint(s.Measured))...)
				ch <- gauge(descCDemand, float64(s.DemandMilli)/request.Whole, lv...)
				if s.Use.Known() && s.Use.BusyMilli != nil {
					ul := append(append([]string(nil), lv...), string(s.Use.Source))
					ch <- gauge(descCBusy, float64(*s.Use.BusyMilli)/request.Whole, ul...)
					ch <- gauge(descCIdle, boolf(s.Idle), ul...)
				}
			}
		}
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
