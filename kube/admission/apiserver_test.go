package admission

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// countingHandler counts the reviews the API server sends.
type countingHandler struct {
	next  http.Handler
	calls atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	c.next.ServeHTTP(w, r)
}

// webhookFromManifest returns the MutatingWebhookConfiguration of
// deploy/webhook.yaml, so the test exercises its rules and match conditions.
func webhookFromManifest(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	mwc, err := testcluster.WebhookFromManifest("../../deploy/webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return mwc
}

// TestWebhookOnRealAPIServer registers the webhook of deploy/webhook.yaml
// with a real kube-apiserver (pointing at this process over TLS with a CA of
// the test's own) and creates pods through the API.
func TestWebhookOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, _, cfg := testcluster.ForTest(t, false)
	client := kubernetes.NewForConfigOrDie(cfg)

	ca := newTestCA(t)
	certFile, keyFile := ca.issue(t, t.TempDir(), "tessera-webhook")
	counter := &countingHandler{next: newHandler(t)}
	srv, err := NewServer(ServerConfig{CertFile: certFile, KeyFile: keyFile, Handler: counter})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)

	mwc := webhookFromManifest(t)
	mwc.Annotations = nil
	url := "https://" + addr + "/mutate"
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.PEM}
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	const ns = "ml"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods(ns)
	kaiPod := func(name string, ann map[string]string) *corev1.Pod {
		p := testPod(ann,
			corev1.Container{Name: "train", Image: "cuda", Resources: limits("cpu", "1")},
			corev1.Container{Name: "log", Image: "busybox"})
		p.Name, p.Namespace = name, ns
		return p
	}

	// The API server picks the configuration up asynchronously: dry-run a
	// KAI pod until it comes back translated.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := pods.Create(ctx, kaiPod("probe", map[string]string{"gpu-fraction": "0.5"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run probe: %v", err)
		}
		if _, ok := p.Spec.Containers[0].Resources.Limits[workload.ResourceGPU]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server never called the webhook")
		}
		time.Sleep(200 * time.Millisecond)
	}

	got, err := pods.Create(ctx, kaiPod("kai", map[string]string{"gpu-memory": "20000", "gpu-fraction-num-devices": "2"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create KAI pod: %v", err)
	}
	train := got.Spec.Containers[0].Resources
	if q := train.Limits[workload.ResourceGPU]; q.Value() != 2 {
		t.Errorf("container train: limit %s = %s, want 2", workload.ResourceGPU, q.String())
	}
	if q := train.Requests[workload.ResourceGPU]; q.Value() != 2 {
		t.Errorf("container train: request %s = %s, want 2", workload.ResourceGPU, q.String())
	}
	if q := train.Limits["cpu"]; q.String() != "1" {
		t.Errorf("container train: cpu limit %s, want 1 kept", q.String())
	}
	if len(got.Spec.Containers[1].Resources.Limits) != 0 {
		t.Errorf("container log got limits %v, want none", got.Spec.Containers[1].Resources.Limits)
	}
	if got.Annotations[workload.AnnotationMemory] != "20000Mi" || got.Annotations["gpu-memory"] != "" || got.Annotations[AnnotationMigratedFrom] != "gpu-fraction-num-devices=2,gpu-memory=20000" {
		t.Errorf("annotations %v: want gpu-memory translated to %s", got.Annotations, workload.AnnotationMemory)
	}
	reqs, err := workload.FromPod(got, newHandler(t).cfg.Catalog)
	if err != nil || len(reqs) != 1 || reqs[0].GPU.Count != 2 || reqs[0].GPU.MemoryMiB != 20000 {
		t.Errorf("the stored pod reads as %+v, %v; want 2 GPUs with 20000 MiB", reqs, err)
	}

	_, err = pods.Create(ctx, kaiPod("bad", map[string]string{"gpu-fraction": "1.5"}), metav1.CreateOptions{})
	want := `admission webhook "gpu.tessera.io" denied the request: annotation gpu-fraction of container train: must be a share in (0, 1]`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad KAI pod: error %v, want %q", err, want)
	}

	// nvidia.com/gpu and HAMi's resources come back as tessera.io/gpu, in
	// limits and requests, with HAMi's values as annotations of the container.
	resPod := func(name string, train, infer corev1.ResourceRequirements) *corev1.Pod {
		p := testPod(nil,
			corev1.Container{Name: "train", Image: "cuda", Resources: train},
			corev1.Container{Name: "infer", Image: "cuda", Resources: infer},
			corev1.Container{Name: "log", Image: "busybox"})
		p.Name, p.Namespace = name, ns
		return p
	}
	got, err = pods.Create(ctx, resPod("migrated",
		withRequests(limits("nvidia.com/gpu", "2", "cpu", "1"), "nvidia.com/gpu", "2", "cpu", "500m"),
		limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30")), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create nvidia.com/gpu and HAMi pod: %v", err)
	}
	for i, n := range []int64{2, 1} {
		c := got.Spec.Containers[i]
		lim, req := c.Resources.Limits[workload.ResourceGPU], c.Resources.Requests[workload.ResourceGPU]
		if lim.Value() != n || req.Value() != n {
			t.Errorf("container %s: %s limit %s, request %s; want %d", c.Name, workload.ResourceGPU, lim.String(), req.String(), n)
		}
		for _, k := range []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"} {
			_, inLim := c.Resources.Limits[k]
			_, inReq := c.Resources.Requests[k]
			if inLim || inReq {
				t.Errorf("container %s still has %s: %+v", c.Name, k, c.Resources)
			}
		}
	}
	if q := got.Spec.Containers[0].Resources.Requests["cpu"]; q.String() != "500m" {
		t.Errorf("container train: cpu request %s, want 500m kept", q.String())
	}
	wantAnn := map[string]string{
		workload.AnnotationCompute + ".infer": "30%", workload.AnnotationMemory + ".infer": "3000Mi",
		AnnotationMigratedFrom: "infer:nvidia.com/gpu=1,infer:nvidia.com/gpucores=30,infer:nvidia.com/gpumem=3000,train:nvidia.com/gpu=2",
	}
	for k, v := range wantAnn {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got.Annotations[k], v, got.Annotations)
		}
	}
	reqs, err = workload.FromPod(got, newHandler(t).cfg.Catalog)
	if err != nil || len(reqs) != 2 || reqs[0].Convention != workload.Tessera || reqs[0].GPU.Count != 2 || reqs[1].GPU.MemoryMiB != 3000 || reqs[1].GPU.ComputeMilli != 300 {
		t.Errorf("the stored pod reads as %+v, %v; want 2 whole GPUs for train, 30%% and 3000 MiB for infer", reqs, err)
	}

	initPod := resPod("init-gpu", limits("nvidia.com/gpu", "1"), corev1.ResourceRequirements{})
	initPod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "cuda", Resources: limits("nvidia.com/gpu", "1")}}
	_, err = pods.Create(ctx, initPod, metav1.CreateOptions{})
	want = `admission webhook "gpu.tessera.io" denied the request: resource nvidia.com/gpu of container setup: GPUs for init containers are not supported`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("init container with nvidia.com/gpu: error %v, want %q", err, want)
	}

	// Pods outside the match conditions never reach the webhook.
	before := counter.calls.Load()
	other := kaiPod("other-scheduler", map[string]string{"gpu-fraction": "0.5"})
	other.Spec.SchedulerName = "default-scheduler"
	otherNVIDIA := resPod("other-scheduler-nvidia", limits("nvidia.com/gpu", "1"), limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "30"))
	otherNVIDIA.Spec.SchedulerName = "default-scheduler"
	plain := kaiPod("plain", nil)
	for _, p := range []*corev1.Pod{other, otherNVIDIA, plain} {
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
		// (The API server itself defaults requests to limits.)
		for i, c := range created.Spec.Containers {
			if !equality.Semantic.DeepEqual(c.Resources.Limits, p.Spec.Containers[i].Resources.Limits) || created.Annotations[AnnotationMigratedFrom] != "" {
				t.Errorf("pod %s was mutated: container %s has limits %v, annotations %v", p.Name, c.Name, c.Resources.Limits, created.Annotations)
			}
		}
	}
	if n := counter.calls.Load() - before; n != 0 {
		t.Errorf("the API server sent %d reviews for pods outside the match conditions, want 0", n)
	}

	// A pod asking through Tessera's own key reaches the webhook and is
	// stored with its share counted for quotas (a whole GPU: 1000).
	native, err := pods.Create(ctx, resPod("native", limits(workload.ResourceGPU, "1"), limits("cpu", "1")), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create native: %v", err)
	}
	lim := native.Spec.Containers[0].Resources.Limits[workload.ResourceGPUMilli]
	req := native.Spec.Containers[0].Resources.Requests[workload.ResourceGPUMilli]
	_, sidecar := native.Spec.Containers[1].Resources.Limits[workload.ResourceGPUMilli]
	if lim.Value() != 1000 || req.Value() != 1000 || sidecar {
		t.Errorf("pod native: %s limit %s, request %s, in the CPU container %v; want 1000 in the GPU container only (%+v)",
			workload.ResourceGPUMilli, lim.String(), req.String(), sidecar, native.Spec.Containers)
	}
}
