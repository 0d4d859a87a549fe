package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// BenchmarkBindThroughput measures pods bound per second on a real API
// server with KWOK nodes of 8 GPUs: Tessera placing half-GPU pods, and the
// stock kube-scheduler placing the same number of whole-GPU pods
// (nvidia.com/gpu, advertised 16 per node so that they all fit), in the same
// run, under three sets of client rate limits:
//
//   - stock: each scheduler with its own defaults (Tessera's command-line
//     defaults, 200 QPS / 400 burst plus an events client of the same size;
//     kube-scheduler's, 50 / 100 plus its events client);
//   - equal: both at 200 / 400;
//   - unlimited: both at 5000 / 10000, so the schedulers and the API server's
//     CPU are the limit rather than the clients.
//
// The pods exist before each scheduler starts; the rate is taken from its
// first bind to its last; a scenario's pods are deleted before the next.
// Scale with TESSERA_BENCH_NODES (default 1000) and TESSERA_BENCH_PODS
// (default 10000); pick scenarios with TESSERA_BENCH_LIMITS (default
// "stock,equal,unlimited"). Run it with `make bench-kube`.
//
// TESSERA_BENCH_SCENARIO=mix runs the mix scenario instead (benchMix,
// bench_mix_test.go): 5,000 nodes by default, fractional, whole-GPU,
// multi-GPU and gang pods in two queues, both schedulers as processes of
// their own, with pre-created (burst) and steadily arriving pods, and a
// table of pods/s, creation-to-bound latency percentiles and the
// schedulers' CPU seconds and peak RSS.
//
// TESSERA_BENCH_SCENARIO=dra runs the DRA scenario (benchDRA,
// bench_dra_test.go): the mix scenario's harness with every GPU a DRA
// device of Tessera's driver and every pod a ResourceClaim (whole GPUs,
// shares, shares with burst, shared claims), checked after each row.
func BenchmarkBindThroughput(b *testing.B) {
	switch sc := os.Getenv("TESSERA_BENCH_SCENARIO"); sc {
	case "", "half":
	case "mix":
		benchMix(b)
		return
	case "dra":
		benchDRA(b)
		return
	default:
		b.Fatalf("TESSERA_BENCH_SCENARIO: unknown scenario %q; allowed: half (the default), mix, dra", sc)
	}
	nodes, pods := envInt(b, "TESSERA_BENCH_NODES", 1000), envInt(b, "TESSERA_BENCH_PODS", 10000)
	type limits struct {
		qps   float32
		burst int
	}
	all := map[string][2]limits{ // tessera, kube-scheduler (0: its defaults)
		"stock":     {{200, 400}, {0, 0}},
		"equal":     {{200, 400}, {200, 400}},
		"unlimited": {{5000, 10000}, {5000, 10000}},
	}
	names := []string{"stock", "equal", "unlimited"}
	if v := os.Getenv("TESSERA_BENCH_LIMITS"); v != "" {
		names = strings.Split(v, ",")
		for _, n := range names {
			if _, ok := all[n]; !ok {
				b.Fatalf("TESSERA_BENCH_LIMITS: unknown scenario %q; allowed: stock, equal, unlimited", n)
			}
		}
	}
	ctx, cl, cfg := testcluster.ForTest(b, true)
	cfg.QPS, cfg.Burst = 2000, 4000 // the harness's own client: fast set-up
	setup := kubernetes.NewForConfigOrDie(cfg)
	createBenchNodes(ctx, b, setup, nodes, "16")
	b.ResetTimer()
	for _, scenario := range names {
		lim := all[scenario]
		rates := map[string]float64{}
		for si, sc := range []string{"tessera", "kube-scheduler"} {
			ns := scenario + "-" + sc
			if _, err := setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			parallel(b, pods, func(i int) error {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%05d", i), Namespace: ns},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}}}}
				if sc == "tessera" {
					p.Spec.SchedulerName = DefaultName
					p.Annotations = map[string]string{workload.AnnotationCompute: "0.5"}
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}
				} else {
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
				}
				_, err := setup.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				return err
			})
			b.StartTimer()
			l := lim[si]
			var stop func()
			if sc == "tessera" {
				scfg := *cfg
				scfg.QPS, scfg.Burst = l.qps, l.burst
				s, err := New(Config{Client: kubernetes.NewForConfigOrDie(&scfg), EventClient: kubernetes.NewForConfigOrDie(&scfg),
					Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DisablePreemption: true})
				if err != nil {
					b.Fatal(err)
				}
				sctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- s.Run(sctx) }()
				stop = func() { cancel(); <-done }
			} else {
				if err := cl.StartKubeScheduler(ctx, l.qps, l.burst); err != nil {
					b.Fatal(err)
				}
				stop = cl.StopKubeScheduler
			}
			rates[sc] = bindRate(ctx, b, setup, ns, pods)
			stop()
			b.StopTimer()
			deletePods(ctx, b, setup, ns, pods)
			b.StartTimer()
		}
		b.ReportMetric(rates["tessera"], scenario+"-tessera-pods/s")
		b.ReportMetric(rates["kube-scheduler"], scenario+"-kube-scheduler-pods/s")
		b.ReportMetric(rates["tessera"]/rates["kube-scheduler"], scenario+"-ratio")
	}
}

// bindRate watches ns until want pods are bound and returns binds per
// second between the first and the last bind.
func bindRate(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string, want int) float64 {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	var mu sync.Mutex
	bound := map[types.UID]bool{}
	var first, last time.Time
	done := make(chan struct{})
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if bound[p.UID] {
			return
		}
		now := time.Now()
		if len(bound) == 0 {
			first = now
		}
		bound[p.UID], last = true, now
		if len(bound) == want {
			close(done)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }}); err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }() // Shutdown waits for the informer, which stops with ctx
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		n := len(bound)
		mu.Unlock()
		b.Fatalf("%s: %d of %d pods bound before the deadline", ns, n, want)
	}
	mu.Lock()
	defer mu.Unlock()
	return float64(want-1) / max(last.Sub(first).Seconds(), 1e-3)
}

// parallel runs f for 0..n-1 on 32 workers and fails on the first error.
func parallel(b *testing.B, n int, f func(int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: must be a whole number >= 1, got %q", name, v)
	}
	return n
}
