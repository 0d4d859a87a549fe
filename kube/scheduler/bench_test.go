package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/testcluster"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// BenchmarkBindThroughput measures pods bound per second on a real API
// server with KWOK nodes of 8 GPUs: Tessera placing half-GPU pods, and the
// stock kube-scheduler placing the same number of whole-GPU pods
// (nvidia.com/gpu, advertised 16 per node so that they all fit), in the same
// run with the same client rate limits. The pods exist before each scheduler
// starts; the rate is taken from its first bind to its last. Scale with
// TESSERA_BENCH_NODES (default 1000) and TESSERA_BENCH_PODS (default 10000).
// Run it with `make bench-kube`.
func BenchmarkBindThroughput(b *testing.B) {
	nodes, pods := envInt(b, "TESSERA_BENCH_NODES", 1000), envInt(b, "TESSERA_BENCH_PODS", 10000)
	const qps, burst = 200, 400
	ctx, cl, cfg := testcluster.ForTest(b, true)
	cfg.QPS, cfg.Burst = 2000, 4000 // the harness's own client: fast set-up
	setup := kubernetes.NewForConfigOrDie(cfg)
	parallel(b, nodes, func(i int) error {
		res := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("16"),
			workload.ResourceGPU: resource.MustParse("128"),
		}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%04d", i), Labels: map[string]string{LabelModel: "H100", LabelCount: "8"},
				Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
			Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
		}
		_, err := setup.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	rates := map[string]float64{}
	for _, sc := range []string{"tessera", "kube-scheduler"} {
		ns := "bench-" + sc
		if _, err := setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
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
		b.ResetTimer()
		stop := func() {}
		if sc == "tessera" {
			scfg := *cfg
			scfg.QPS, scfg.Burst = qps, burst
			s, err := New(Config{Client: kubernetes.NewForConfigOrDie(&scfg), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DisablePreemption: true})
			if err != nil {
				b.Fatal(err)
			}
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Run(sctx) }()
			stop = func() { cancel(); <-done }
		} else if err := cl.StartKubeScheduler(ctx, qps, burst); err != nil {
			b.Fatal(err)
		}
		rates[sc] = bindRate(ctx, b, setup, ns, pods)
		stop()
		b.StopTimer()
	}
	b.ReportMetric(rates["tessera"], "tessera-pods/s")
	b.ReportMetric(rates["kube-scheduler"], "kube-scheduler-pods/s")
	b.ReportMetric(rates["tessera"]/rates["kube-scheduler"], "ratio")
}

// bindRate polls until want pods of ns are bound and returns binds per
// second between the first and the last observed bind.
func bindRate(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string, want int) float64 {
	var first time.Time
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		now := time.Now()
		if bound > 0 && first.IsZero() {
			first = now
		}
		if bound >= want {
			return float64(want-1) / max(now.Sub(first).Seconds(), 1e-3)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("%s: not all %d pods bound in time", ns, want)
	return 0
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
