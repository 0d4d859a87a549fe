package clusterview

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/request"
)

var descQueueBusy = prometheus.NewDesc("tessera_scheduler_queue_gpu_busy",
	"GPUs' worth of compute a queue's running pods (with its children's) used over their agents' last use window, as the nodes' GPUUse objects publish it (the cluster dashboard's figure), by source: measured (NVML) or simulated (declared loads), never added together; absent where none of the queue's pods is metered.",
	[]string{"queue", "source"}, nil)

// QueueUse exports each queue's published use (tessera_scheduler_queue_gpu_busy)
// as the cluster view sums it, read from the scheduler's view at each
// scrape: the figure beside tessera_scheduler_queue_gpu_used (the booking)
// in Prometheus is the dashboard's. Before the first cycle it exports none.
type QueueUse struct {
	Source Source
	// Timeout bounds a scrape's view read (5 s when zero).
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (c QueueUse) Describe(ch chan<- *prometheus.Desc) { ch <- descQueueBusy }

// Collect implements prometheus.Collector.
func (c QueueUse) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := c.Source.Snapshot(ctx)
	if err != nil {
		return // no cycle yet: nothing to say
	}
	s.Summarize()
	for _, q := range s.Queues {
		for _, f := range []struct {
			v      *int64
			source string
		}{{q.MeasuredMilli, "measured"}, {q.SimulatedMilli, "simulated"}} {
			if f.v != nil {
				ch <- prometheus.MustNewConstMetric(descQueueBusy, prometheus.GaugeValue, float64(*f.v)/request.Whole, q.Name, f.source)
			}
		}
	}
}
