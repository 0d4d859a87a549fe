package scheduler

import (
	"context"
	"fmt"

	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

func startScheduler(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, reg prometheus.Registerer, opts ...func(*Config)) (stop func()) {
	t.Helper()
	// Short resync and backoffs keep the tests quick; tests of the backoff
	// itself set their own.
	cfg := Config{Client: client, Dynamic: dyn, Metrics: reg, Log: slog.New(slog.NewTextHandler(testWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelDebug})), Resync: 200 * time.Millisecond,
		PodInitialBackoff: 100 * time.Millisecond, PodMaxBackoff: 400 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}
}

func createGPUNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), workload.ResourceGPU: resource.MustParse("32"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, gpus string, ann map[string]string) {
	t.Helper()
	createPodWith(ctx, t, c, name, gpus, nil, ann)
}

func createPodWith(ctx context.Context, t *testing.T, c kubernetes.Interface, name, gpus string, labels, ann map[string]string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)},
			},
		}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func countBound(ctx context.Context, c kubernetes.Interface, prefix string, want int) error {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	n := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d pods %s* bound, want %d", n, prefix, want)
	}
	return nil
}

func hasCondition(ctx context.Context, c kubernetes.Interface, name, reason, msg string) error {
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName != "" {
		return fmt.Errorf("pod %s was bound to %s", name, p.Spec.NodeName)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == reason && strings.Contains(cond.Message, msg) {
			return nil
		}
	}
	return fmt.Errorf("pod %s conditions %+v lack %s %q", name, p.Status.Conditions, reason, msg)
}

// checkNoOverbooking sums the granted compute per GPU over all bound pods
// and checks every granted GPU belongs to the pod's node (nodeOf: UUID -> node).
func checkNoOverbooking(ctx context.Context, t *testing.T, c kubernetes.Interface, nodeOf map[string]string) {
	t.Helper()
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		if reqs, err := workload.FromPod(&p, catalog.Default()); err == nil && len(reqs) == 0 {
			if v, ok := p.Annotations[binding.AnnotationKey]; ok {
				t.Fatalf("pod %s asks for no GPU but carries an assignment: %s", p.Name, v)
			}
			continue
		}
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Fatalf("bound pod %s: %v", p.Name, err)
		}
		if a.Node != p.Spec.NodeName {
			t.Fatalf("pod %s bound to %s but assigned on %s", p.Name, p.Spec.NodeName, a.Node)
		}
		for _, ctr := range a.Containers {
			for _, g := range ctr.GPUs {
				if nodeOf[g.UUID] != p.Spec.NodeName {
					t.Fatalf("pod %s on %s got GPU %s, which is on %q", p.Name, p.Spec.NodeName, g.UUID, nodeOf[g.UUID])
				}
				used[g.UUID] += g.ComputeMilli
			}
		}
	}
	for uuid, m := range used {
		if m > 1000 {
			t.Fatalf("GPU %s over-booked: %d/1000", uuid, m)
		}
	}
}

// createQueue creates a Queue object with the given spec.
func createQueue(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) {
	t.Helper()
	createCustom(ctx, t, dyn, queues.Resource(), "Queue", "", name, spec)
}

// createCustom creates a tessera.io/v1alpha1 object (namespace "" for a
// cluster-scoped kind).
func createCustom(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind, namespace, name string, spec map[string]any) {
	t.Helper()
	meta := map[string]any{"name": name}
	r := dyn.Resource(gvr)
	var ri dynamic.ResourceInterface = r
	if namespace != "" {
		meta["namespace"] = namespace
		ri = r.Namespace(namespace)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}}
	if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls check for up to a minute (testcluster.Eventually).
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	testcluster.Eventually(t, what, 60*time.Second, check)
}

// testWriter sends log lines to the test log (testcluster.LogWriter).
type testWriter = testcluster.LogWriter

// controlPlane starts etcd, kube-apiserver and KWOK for one test and
// returns a client; everything stops when the test ends.
func controlPlane(t *testing.T) (context.Context, kubernetes.Interface) {
	t.Helper()
	ctx, _, cfg := testcluster.ForTest(t, true)
	c := kubernetes.NewForConfigOrDie(cfg)
	restConfigs.Store(c, cfg)
	return ctx, c
}

// restConfigs remembers each test client's config (for dynamicFor).
var restConfigs sync.Map

func dynamicFor(t *testing.T, c kubernetes.Interface) dynamic.Interface {
	t.Helper()
	cfg, ok := restConfigs.Load(c)
	if !ok {
		t.Fatal("no rest config for client")
	}
	return dynamic.NewForConfigOrDie(cfg.(*rest.Config))
}
