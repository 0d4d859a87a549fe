package kueue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

const (
	ns         = "default"
	queueLabel = "kueue.x-k8s.io/queue-name"
	kueueAPI   = "kueue.x-k8s.io/v1beta2"
)

func kueueResource(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: plural}
}

// Quota of one whole GPU admits one Job asking one GPU; a second waits in
// Kueue (its Workload pending for want of quota) until the first finishes,
// and each admitted Job's pod is placed by Tessera's scheduler.
func TestQuotaOfWholeGPUs(t *testing.T) {
	ctx, client, dyn := setup(t, "")
	createQueues(ctx, t, dyn, workload.ResourceGPU, "1")

	createJob(ctx, t, client, "first", gpuAsk{workload.ResourceGPU: "1"}, nil)
	waitFor(t, "the first Job's pod placed by Tessera", func() error { return placed(ctx, client, "first") })
	createJob(ctx, t, client, "second", gpuAsk{workload.ResourceGPU: "1"}, nil)
	waitFor(t, "the second Job waiting in Kueue for quota", func() error { return waitsForQuota(ctx, dyn, "second") })
	assertSuspended(ctx, t, client, "second")

	finish(ctx, t, client, "first")
	waitFor(t, "the second Job's pod placed once the first finished", func() error { return placed(ctx, client, "second") })
}

// ignoreGPUCount tells Kueue not to count tessera.io/gpu (a share would
// count as a whole GPU) so that tessera.io/gpu-milli alone is the quota.
const ignoreGPUCount = `resources:
  transformations:
  - input: ` + workload.ResourceGPU + `
    strategy: Replace
`

// A fraction counts as a fraction: with one GPU of quota in
// tessera.io/gpu-milli, four Jobs of a quarter GPU run, a fifth waits in
// Kueue until one of them finishes. The Jobs' authors write only Tessera's
// keys: Tessera's webhook writes tessera.io/gpu-milli into the templates
// when the Jobs are created, before Kueue counts them.
func TestQuotaCountsFractions(t *testing.T) {
	ctx, client, dyn := setup(t, ignoreGPUCount)
	serveWebhook(ctx, t, client)
	createQueues(ctx, t, dyn, workload.ResourceGPUMilli, "1000")
	quarter := gpuAsk{workload.ResourceGPU: "1"}
	ann := map[string]string{workload.AnnotationCompute: "0.25"}

	for i := range 4 {
		job := fmt.Sprintf("quarter-%d", i)
		createJob(ctx, t, client, job, quarter, ann)
		if err := checkGPUMilli(ctx, client, job, 250); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		job := fmt.Sprintf("quarter-%d", i)
		waitFor(t, job+"'s pod placed by Tessera", func() error { return placed(ctx, client, job) })
	}
	waitFor(t, "four quarters counted as one GPU of quota", func() error { return quotaUsed(ctx, dyn, workload.ResourceGPUMilli, 1000) })
	createJob(ctx, t, client, "fifth", quarter, ann)
	waitFor(t, "the fifth Job waiting in Kueue for quota", func() error { return waitsForQuota(ctx, dyn, "fifth") })
	assertSuspended(ctx, t, client, "fifth")

	finish(ctx, t, client, "quarter-0")
	waitFor(t, "the fifth Job's pod placed once a quarter finished", func() error { return placed(ctx, client, "fifth") })
}

// setup starts the control plane with the Job controller, Tessera's
// scheduler, a KWOK node with two A100s and Kueue (extra: more of its
// Configuration). Two GPUs on the node: what holds a Job back is Kueue's
// quota, not room.
func setup(t *testing.T, extra string) (context.Context, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Kueue reads its metrics certificate from a fixed path under /etc: needs root")
	}
	ctx, c, cfg := testcluster.ForTestWith(t, true, testcluster.Options{Controllers: []string{"job-controller"}})
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	startTessera(ctx, t, client, dyn)
	if err := testcluster.CreateGPUNode(ctx, client, dyn, testcluster.GPUNode{Name: "gpu-0", Model: "A100-80GB", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartKueue(ctx, extra); err != nil {
		t.Fatalf("start kueue: %v\n%s", err, c.Logs("kueue", 40))
	}
	return ctx, client, dyn
}

func startTessera(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{Client: client, Dynamic: dyn, Metrics: prometheus.NewRegistry(),
		Log: slog.New(slog.NewTextHandler(testcluster.LogWriter{T: t}, nil)), Resync: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
}

// createQueues makes the ResourceFlavor "default", the ClusterQueue "gpus"
// with quota of resource and the LocalQueue "team" in ns pointing at it.
func createQueues(ctx context.Context, t *testing.T, dyn dynamic.Interface, res, quota string) {
	t.Helper()
	create(ctx, t, dyn, "resourceflavors", "ResourceFlavor", "", "default", map[string]any{})
	create(ctx, t, dyn, "clusterqueues", "ClusterQueue", "", "gpus", map[string]any{
		"namespaceSelector": map[string]any{},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{res},
			"flavors": []any{map[string]any{"name": "default", "resources": []any{
				map[string]any{"name": res, "nominalQuota": quota}}}},
		}},
	})
	create(ctx, t, dyn, "localqueues", "LocalQueue", ns, "team", map[string]any{"clusterQueue": "gpus"})
}

func create(ctx context.Context, t *testing.T, dyn dynamic.Interface, plural, kind, namespace, name string, spec map[string]any) {
	t.Helper()
	meta := map[string]any{"name": name}
	var ri dynamic.ResourceInterface = dyn.Resource(kueueResource(plural))
	if namespace != "" {
		meta["namespace"] = namespace
		ri = dyn.Resource(kueueResource(plural)).Namespace(namespace)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueAPI, "kind": kind, "metadata": meta, "spec": spec}}
	if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
}

// gpuAsk is what the Job's one container asks, as requests and limits.
type gpuAsk map[corev1.ResourceName]string

// createJob creates a one-pod Job for Tessera's scheduler, suspended and
// labelled with the LocalQueue, as Kueue's mutating webhook would leave it.
func createJob(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, ask gpuAsk, ann map[string]string) {
	t.Helper()
	res := corev1.ResourceList{}
	for k, v := range ask {
		res[k] = resource.MustParse(v)
	}
	suspend, one, never := true, int32(1), int32(0)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queueLabel: "team"}},
		Spec: batchv1.JobSpec{
			Suspend: &suspend, Parallelism: &one, Completions: &one, BackoffLimit: &never,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}, Annotations: ann},
				Spec: corev1.PodSpec{
					SchedulerName: scheduler.DefaultName, RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
						Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
				},
			},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job %s: %v", name, err)
	}
}

func jobPods(ctx context.Context, client kubernetes.Interface, job string) ([]corev1.Pod, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job=" + job})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// placed: the Job's pod is bound to the GPU node by Tessera.
func placed(ctx context.Context, client kubernetes.Interface, job string) error {
	pods, err := jobPods(ctx, client, job)
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return fmt.Errorf("job %s has %d pods, want 1", job, len(pods))
	}
	if p := pods[0]; p.Spec.NodeName != "gpu-0" || p.Spec.SchedulerName != scheduler.DefaultName {
		return fmt.Errorf("pod %s of job %s: node %q, scheduler %q", p.Name, job, p.Spec.NodeName, p.Spec.SchedulerName)
	}
	return nil
}

// workloadOf finds the Workload Kueue made for the Job.
func workloadOf(ctx context.Context, dyn dynamic.Interface, job string) (*unstructured.Unstructured, error) {
	list, err := dyn.Resource(kueueResource("workloads")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.Kind == "Job" && o.Name == job {
				return &list.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no Workload of job %s yet", job)
}

func condition(w *unstructured.Unstructured, typ string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		conds = append(conds, metav1.Condition{Type: s("type"), Status: metav1.ConditionStatus(s("status")), Reason: s("reason"), Message: s("message")})
	}
	return meta.FindStatusCondition(conds, typ)
}

// waitsForQuota: Kueue has looked at the Job's Workload and holds it back
// for want of quota.
func waitsForQuota(ctx context.Context, dyn dynamic.Interface, job string) error {
	w, err := workloadOf(ctx, dyn, job)
	if err != nil {
		return err
	}
	qr := condition(w, "QuotaReserved")
	if qr == nil || qr.Status != metav1.ConditionFalse || !strings.Contains(qr.Message, "insufficient unused quota") {
		return fmt.Errorf("workload %s: QuotaReserved %+v, want False for insufficient quota", w.GetName(), qr)
	}
	return nil
}

// quotaUsed: the ClusterQueue "gpus" counts want of res in use.
func quotaUsed(ctx context.Context, dyn dynamic.Interface, res string, want int64) error {
	cq, err := dyn.Resource(kueueResource("clusterqueues")).Get(ctx, "gpus", metav1.GetOptions{})
	if err != nil {
		return err
	}
	flavors, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		rs, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
		for _, r := range rs {
			m := r.(map[string]any)
			if m["name"] != res {
				continue
			}
			total, _ := m["total"].(string)
			q, err := resource.ParseQuantity(total)
			if err != nil {
				return fmt.Errorf("usage of %s: %q: %w", res, total, err)
			}
			if q.Value() != want {
				return fmt.Errorf("ClusterQueue uses %s of %s, want %d", total, res, want)
			}
			return nil
		}
	}
	return fmt.Errorf("ClusterQueue status %v has no usage of %s", flavors, res)
}

func assertSuspended(ctx context.Context, t *testing.T, client kubernetes.Interface, job string) {
	t.Helper()
	j, err := client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Fatalf("job %s was let run while its Workload waits for quota", job)
	}
	pods, err := jobPods(ctx, client, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 0 {
		t.Fatalf("job %s waiting in Kueue has %d pods", job, len(pods))
	}
}

// finish ends the Job's pod as its kubelet would (KWOK leaves a running
// pod running) and waits for the Job to complete.
func finish(ctx context.Context, t *testing.T, client kubernetes.Interface, job string) {
	t.Helper()
	pods, err := jobPods(ctx, client, job)
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods of job %s: %d (%v)", job, len(pods), err)
	}
	p := pods[0]
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finish pod %s: %v", p.Name, err)
	}
	waitFor(t, "job "+job+" complete", func() error {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("job %s conditions %+v", job, j.Status.Conditions)
	})
}

// waitFor polls check for up to a minute: a liveness bound.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	testcluster.Eventually(t, what, 60*time.Second, check)
}
