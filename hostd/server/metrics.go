package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
)

var (
	descJobs = prometheus.NewDesc("tessera_host_jobs", "Jobs known to the host daemon, by state.", []string{"state"}, nil)
	descFree = prometheus.NewDesc("tessera_host_gpu_free_fraction", "Unbooked compute share of a GPU, in [0, 1].", []string{"gpu", "uuid", "model"}, nil)
	descMem  = prometheus.NewDesc("tessera_host_gpu_free_memory_bytes", "Unbooked memory of a GPU.", []string{"gpu", "uuid", "model"}, nil)
	descUp   = prometheus.NewDesc("tessera_host_simulated", "1 when the daemon runs on simulated GPUs.", nil, nil)
)

// collector reads the daemon at scrape time.
type collector struct{ d *hostd.Daemon }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descFree, descMem, descUp} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	jobs, err := c.d.Jobs()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descJobs, err)
		return
	}
	counts := map[api.State]int{}
	for _, s := range []api.State{api.Queued, api.Running, api.Succeeded, api.Failed, api.Stopped, api.Lost, api.Preempted} {
		counts[s] = 0
	}
	for _, j := range jobs {
		counts[j.State]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), string(s))
	}
	st, err := c.d.Status()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descFree, err)
		return
	}
	for _, g := range st.GPUs {
		idx := strconv.Itoa(g.Index)
		ch <- prometheus.MustNewConstMetric(descFree, prometheus.GaugeValue, g.FreeFraction, idx, g.UUID, g.Model)
		ch <- prometheus.MustNewConstMetric(descMem, prometheus.GaugeValue, float64(g.FreeMemoryMiB)*(1<<20), idx, g.UUID, g.Model)
	}
	sim := 0.0
	if st.Simulated {
		sim = 1
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, sim)
}

func metricsHandler(d *hostd.Daemon) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collector{d: d}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
