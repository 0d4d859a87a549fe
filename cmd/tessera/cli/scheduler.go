package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/kube/leader"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/webui"
)

func newSchedulerCommand(a *app) *cobra.Command {
	var (
		kubeconfig string
		name       string
		policy     string
		seed       uint64
		elect      bool
		leaseNS    string
		identity   string
		metricsAt  string
		qps        float32
		burst      int
		noPreempt  bool
		minRuntime time.Duration
		reserveIn  time.Duration
		backoff0   time.Duration
		backoffMax time.Duration
		dashboard  bool
	)
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the Kubernetes scheduler for pods with schedulerName: tessera",
		Long: `Run Tessera's Kubernetes scheduler. Pods that set spec.schedulerName to
--name are placed by the placement engine; their GPU assignment is written
to the annotation tessera.io/assignment before they are bound. See docs/api.md
for the resources and annotations a pod uses.

In a cluster it uses the pod's service account; outside, --kubeconfig.`,
		Example: `  tessera scheduler --kubeconfig ~/.kube/config --policy tessera`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag is checked before anything is opened or started.
			if qps <= 0 || burst < 1 {
				return fmt.Errorf("--kube-api-qps must be > 0 and --kube-api-burst >= 1, got %v and %d", qps, burst)
			}
			if minRuntime < 0 {
				return fmt.Errorf("--preemption-min-runtime must be >= 0, got %v", minRuntime)
			}
			if reserveIn < 0 {
				return fmt.Errorf("--reservation-wait must be >= 0 (0 turns reservations off), got %v", reserveIn)
			}
			if backoff0 <= 0 || backoffMax < backoff0 {
				return fmt.Errorf("--pod-initial-backoff must be > 0 and --pod-max-backoff >= it, got %v and %v", backoff0, backoffMax)
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			cfg.QPS, cfg.Burst = qps, burst
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			// Events go through their own client, as kube-scheduler's do, so
			// that reporting never takes request budget from binding.
			events, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubernetes events client: %w", err)
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubernetes dynamic client: %w", err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			s, err := scheduler.New(scheduler.Config{Client: client, EventClient: events, Dynamic: dyn, Metrics: reg,
				DisablePreemption: noPreempt, PreemptionMinRuntime: minRuntime, ReservationWait: reserveIn, PodInitialBackoff: backoff0, PodMaxBackoff: backoffMax, Name: name, Policy: policy, Seed: seed, Catalog: a.catalog, Log: a.log})
			if err != nil {
				return err
			}
			if metricsAt != "" {
				var ui *webui.UI
				if dashboard {
					ui = webui.New(clusterview.Source{Viewer: s}, webui.Options{Title: "Tessera cluster", Scope: "cluster", Log: a.log})
					go ui.Run(cmd.Context())
				}
				stop, err := serveMetrics(cmd.Context(), a, metricsAt, reg, ui)
				if err != nil {
					return err
				}
				defer stop()
			}
			if !elect {
				return s.Run(cmd.Context())
			}
			if identity == "" {
				if identity, err = os.Hostname(); err != nil {
					return fmt.Errorf("--leader-elect-identity: not set and no host name: %w", err)
				}
			}
			return s.RunWithLeaderElection(cmd.Context(), leader.Config{Namespace: leaseNS, Name: name + "-scheduler", Identity: identity})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&name, "name", scheduler.DefaultName, "the schedulerName this scheduler serves")
	cmd.Flags().StringVar(&policy, "policy", placement.DefaultPolicy, fmt.Sprintf("placement policy: one of %s, or %s (the same as %s)", strings.Join(placement.Names(), ", "), placement.DefaultAlias, placement.DefaultPolicy))
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed for tie-breaking (decisions are reproducible for a given seed)")
	cmd.Flags().Float32Var(&qps, "kube-api-qps", 200, "queries per second to the API server for binding and reads (events have a budget of their own, the same size)")
	cmd.Flags().IntVar(&burst, "kube-api-burst", 400, "burst of queries to the API server")
	cmd.Flags().BoolVar(&noPreempt, "disable-preemption", false, "never evict lower-priority pods to make room")
	cmd.Flags().DurationVar(&minRuntime, "preemption-min-runtime", time.Minute, "pods that have run less than this are never preempted")
	cmd.Flags().DurationVar(&reserveIn, "reservation-wait", 5*time.Minute, "a pod that fits nowhere for this long reserves a node that smaller pods may only backfill (0: never)")
	cmd.Flags().DurationVar(&backoff0, "pod-initial-backoff", scheduler.DefaultPodInitialBackoff, "how long a pod that could not be bound (fits nowhere, or the API refused its binding) waits before it is tried again; the wait doubles with each failure in a row")
	cmd.Flags().DurationVar(&backoffMax, "pod-max-backoff", scheduler.DefaultPodMaxBackoff, "the longest such wait")
	cmd.Flags().StringVar(&metricsAt, "metrics-addr", ":9401", `address of the /metrics server (and of the dashboard); "" disables it`)
	cmd.Flags().BoolVar(&dashboard, "dashboard", true, "serve the read-only web dashboard's cluster view at / on --metrics-addr (docs/dashboard.md)")
	cmd.Flags().BoolVar(&elect, "leader-elect", true, "run several replicas with one active, through a Lease")
	cmd.Flags().StringVar(&leaseNS, "leader-elect-namespace", "kube-system", "namespace of the leader-election Lease (named <name>-scheduler)")
	cmd.Flags().StringVar(&identity, "leader-elect-identity", "", "this replica's identity in the Lease (default: host name)")
	return withProfiling(cmd, a) // --profiling-addr (pprof.go)
}

// serveMetrics serves reg on addr at /metrics, and ui's routes when ui is
// not nil, until ctx ends or stop is called.
func serveMetrics(ctx context.Context, a *app, addr string, reg *prometheus.Registry, ui *webui.UI) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: metricsMux(reg, ui), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("metrics server stopped", "err", err)
		}
	}()
	a.log.Info("serving metrics", "addr", ln.Addr().String(), "dashboard", ui != nil)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// metricsMux serves reg at /metrics and, when ui is not nil, the
// dashboard's read-only routes (webui.UI.Register: GET and HEAD only).
func metricsMux(reg *prometheus.Registry, ui *webui.UI) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if ui != nil {
		ui.Register(mux)
	}
	return mux
}
