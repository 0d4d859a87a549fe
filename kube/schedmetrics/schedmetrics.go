package schedmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Metrics are the scheduler's Prometheus series. They are registered on
// the registry given to New (none: not exported), never on a global one.
type Metrics struct {
	pending   prometheus.Gauge
	decisions *prometheus.CounterVec
	// bindings counts Binding calls by result; backingOff is the pods and
	// gangs left out of the last cycle because they wait out a backoff.
	bindings         *prometheus.CounterVec
	bindOK, bindFail prometheus.Counter
	backingOff       prometheus.Gauge
	decision         prometheus.Histogram
	cycle            prometheus.Histogram
	// Per queue, after each cycle.
	queueUsed, queueGuaranteed, queueShare *prometheus.GaugeVec
	// queuePending is pending per queue, at the start of each cycle.
	queuePending *prometheus.GaugeVec
}

// New makes the series and registers them on reg (nil: none).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tessera_scheduler_pending_pods",
			Help: "Pods waiting for this scheduler at the start of the last cycle.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tessera_scheduler_decisions_total",
			Help: "Scheduling attempts by result: bound (decided; the binding follows), unschedulable, invalid (bad request) or error (the decision could not be recorded).",
		}, []string{"result"}),
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tessera_scheduler_bindings_total",
			Help: "Binding calls to the API server by result: bound or error (the pod is backed off and tried again).",
		}, []string{"result"}),
		backingOff: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tessera_scheduler_backoff_items",
			Help: "Pending pods and gangs left out of the last cycle because they wait out a retry backoff after failing.",
		}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tessera_scheduler_decision_duration_seconds",
			Help:    "Time to decide and bind one pod, API calls included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tessera_scheduler_cycle_duration_seconds",
			Help:    "Time of one scheduling cycle (snapshot and all pending pods).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	m.queueUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tessera_scheduler_queue_gpu_used",
		Help: "GPUs' worth of compute a queue (with its children) uses, bound and assumed pods.",
	}, []string{"queue"})
	m.queueGuaranteed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tessera_scheduler_queue_gpu_guaranteed",
		Help: "GPUs' worth of compute a queue is guaranteed.",
	}, []string{"queue"})
	m.queueShare = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tessera_scheduler_queue_fair_share",
		Help: "A queue's fair-share position: below 1 within its guarantee, above 1 how far over it per unit of weight (lower is served first).",
	}, []string{"queue"})
	m.queuePending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tessera_scheduler_queue_pending_pods",
		Help: "Pods waiting for this scheduler at the start of the last cycle, by the queue that serves them (a gang's, its first member's), those waiting out a backoff included.",
	}, []string{"queue"})
	for _, r := range []string{"bound", "unschedulable", "invalid", "error"} {
		m.decisions.WithLabelValues(r)
	}
	m.bindOK, m.bindFail = m.bindings.WithLabelValues("bound"), m.bindings.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.pending, m.decisions, m.bindings, m.backingOff, m.decision, m.cycle, m.queueUsed, m.queueGuaranteed, m.queueShare, m.queuePending)
	}
	return m
}

// Decisions counts one cycle's pods by result.
type Decisions struct {
	Bound, Unschedulable, Invalid, Errors int
}

// ObserveDecisions records one cycle's pods by result (a gang's members
// all count) and its time per item (a pod or a gang: the cycle decides
// them together, so each is given an equal part of it).
func (m *Metrics) ObserveDecisions(d Decisions, start time.Time, items int) {
	if items > 0 {
		per := time.Since(start).Seconds() / float64(items)
		for range items {
			m.decision.Observe(per)
		}
	}
	m.decisions.WithLabelValues("bound").Add(float64(d.Bound))
	m.decisions.WithLabelValues("invalid").Add(float64(d.Invalid))
	m.decisions.WithLabelValues("unschedulable").Add(float64(d.Unschedulable))
	m.decisions.WithLabelValues("error").Add(float64(d.Errors))
}

// ObserveCycle records the time of one cycle, begun at start.
func (m *Metrics) ObserveCycle(start time.Time) { m.cycle.Observe(time.Since(start).Seconds()) }

// Pending sets how many pods wait at the start of a cycle.
func (m *Metrics) Pending(n int) { m.pending.Set(float64(n)) }

// BackingOff sets how many pods and gangs the last cycle left out to wait
// out a backoff.
func (m *Metrics) BackingOff(n int) { m.backingOff.Set(float64(n)) }

// Bound counts a Binding call that succeeded.
func (m *Metrics) Bound() { m.bindOK.Inc() }

// BindFailed counts a Binding call that failed.
func (m *Metrics) BindFailed() { m.bindFail.Inc() }

// ObserveQueues records every queue's usage and share after a cycle.
func (m *Metrics) ObserveQueues(tree *queueing.Tree, l *queueing.Ledger) {
	m.queueUsed.Reset()
	m.queueGuaranteed.Reset()
	m.queueShare.Reset()
	for _, name := range tree.Names() {
		q, _ := tree.Queue(name)
		m.queueUsed.WithLabelValues(name).Set(float64(l.Used(name).GPUMilli) / request.Whole)
		m.queueGuaranteed.WithLabelValues(name).Set(float64(q.Guaranteed.GPUMilli) / request.Whole)
		m.queueShare.WithLabelValues(name).Set(l.Share(name))
	}
}

// ObservePending records how many pods wait in each queue of tree (0 for a
// queue with none); pods of a queue that tree lacks are left out (the
// cycle rejects them as invalid).
func (m *Metrics) ObservePending(tree *queueing.Tree, waiting map[string]int) {
	m.queuePending.Reset()
	for _, name := range tree.Names() {
		m.queuePending.WithLabelValues(name).Set(float64(waiting[name]))
	}
}
