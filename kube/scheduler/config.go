package scheduler

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
)

// Config configures a Scheduler.
type Config struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// EventClient posts Events (default Client). A client of its own keeps
	// event traffic out of the binding path's rate limit.
	EventClient kubernetes.Interface
	// Name is the schedulerName this scheduler serves (default DefaultName).
	Name string
	// Policy names the placement policy (default placement.DefaultPolicy).
	Policy string
	// Seed makes tie-breaking reproducible.
	Seed uint64
	// Catalog resolves model names (default catalog.Default()).
	Catalog *catalog.Catalog
	// Dynamic, when set, lets the scheduler read the agent's GPUNode
	// objects for nodes' GPUs (real UUIDs, health, NVLink).
	Dynamic dynamic.Interface
	// Inventory reads nodes' GPUs (default: GPUNode objects when Dynamic is
	// set, falling back to node labels; nodeinventory.Labels otherwise).
	Inventory nodeinventory.Source
	// Log receives the scheduler's logs (default slog.Default()).
	Log *slog.Logger
	// Resync is how often a cycle runs without events (default 1s).
	Resync time.Duration
	// Metrics, when set, receives the scheduler's Prometheus series.
	Metrics prometheus.Registerer
	// DisablePreemption turns off evicting lower-priority pods.
	DisablePreemption bool
	// PreemptionMinRuntime protects pods that have run less than this from
	// preemption, counted from the cycle that bound them (one bound before
	// this scheduler started: from its start time; 0: no protection).
	PreemptionMinRuntime time.Duration
	// PreemptorWait bounds how long a pod that named victims waits for
	// them to stop before it may name others (default 2 min).
	PreemptorWait time.Duration
	// ReservationWait is how long a pod may fail to fit before it reserves
	// a node that smaller pods may only backfill (0: no reservations).
	ReservationWait time.Duration
	// PodInitialBackoff and PodMaxBackoff bound how long a pod (or gang)
	// that could not be bound waits before it is tried again: the wait
	// doubles with each failure in a row, from the initial to the maximum
	// (defaults DefaultPodInitialBackoff and DefaultPodMaxBackoff, as
	// kube-scheduler's).
	PodInitialBackoff, PodMaxBackoff time.Duration
	// Clock is the time the scheduling core decides at: run times
	// (PreemptionMinRuntime), backoffs, waits, idle holders' time (the
	// real clock when nil; a test moves its own). Cycle durations in the
	// metrics are always measured on the real one.
	Clock clock.PassiveClock
	// CycleDone, when set, is called by the scheduling loop at the end of
	// every cycle with what it did; the loop waits for it (a test holds
	// the scheduler between two cycles there).
	CycleDone func(CycleStats)
}
