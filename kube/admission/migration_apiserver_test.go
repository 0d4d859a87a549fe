package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestMigrationOnRealAPIServer creates every migration case's pod through
// a real kube-apiserver with the webhook registered (its match condition
// for foreign keys taken from MatchExpression), and Deployments and Jobs
// whose pods kube-controller-manager creates from their templates (HAMi,
// nvshare, KAI and Volcano keys); each stored pod must carry the
// translation, or the API server must refuse it with the webhook's
// message. Jobs' and JobSets' stored templates must carry
// tessera.io/gpu-milli.
func TestMigrationOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// Workloads: kube-controller-manager creates the Deployments' and
	// Jobs' pods, as in a real cluster.
	// The ResourceQuota controller: a quota admits pods only once it has
	// counted the namespace's usage.
	ctx, _, cfg := testcluster.ForTestWith(t, false, testcluster.Options{Workloads: true, Controllers: []string{"resourcequota-controller"}})
	client := kubernetes.NewForConfigOrDie(cfg)
	ca := newTestCA(t)
	certFile, keyFile := ca.issue(t, t.TempDir(), "tessera-webhook")
	srv, err := NewServer(ServerConfig{CertFile: certFile, KeyFile: keyFile, Handler: newHandler(t)})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	mwc := webhookFromManifest(t)
	mwc.Annotations = nil
	url := "https://" + addr + "/mutate"
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.PEM}
		for j, mc := range mwc.Webhooks[i].MatchConditions {
			switch mc.Name {
			case "gpu-request":
				mwc.Webhooks[i].MatchConditions[j].Expression = MatchExpression()
			case "gpu-request-in-template":
				mwc.Webhooks[i].MatchConditions[j].Expression = JobMatchExpression()
			case "gpu-request-in-jobset":
				_, mwc.Webhooks[i].MatchConditions[j].Expression = JobSetMatchExpressions("tessera")
			case "tessera-scheduler":
				// The JobSet's is generated too: it tests each field
				// before reading it.
				if mwc.Webhooks[i].Name == "jobset.gpu.tessera.io" {
					mwc.Webhooks[i].MatchConditions[j].Expression, _ = JobSetMatchExpressions("tessera")
				}
			}
		}
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	const ns = "ml"
	createNamespace(t, client, ns)
	pods := client.CoreV1().Pods(ns)
	// Wait until the API server calls the webhook (it loads the
	// configuration asynchronously).
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := testPod(nil, ctr("main", limits("volcano.sh/vgpu-number", "1")))
		probe.Name, probe.Namespace = "probe", ns
		p, err := pods.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
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
	cat := catalog.Default()
	for i, tc := range migrationCases() {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod.DeepCopy()
			p.Name, p.Namespace = fmt.Sprintf("case-%d", i), ns
			if len(p.OwnerReferences) > 0 {
				// The API server keeps owner references as given; the Job
				// need not exist for admission.
				p.OwnerReferences[0].UID = "00000000-0000-0000-0000-000000000001"
			}
			got, err := pods.Create(ctx, p, metav1.CreateOptions{})
			if tc.denied != "" {
				if err == nil || !strings.Contains(err.Error(), tc.denied) {
					t.Fatalf("error %v, want %q", err, tc.denied)
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			checkMigrated(t, tc, got, cat)
		})
	}

	// Workload controllers: kube-controller-manager's Deployment,
	// ReplicaSet and Job controllers create the pods from the templates,
	// and the webhook translates each one as it is created.
	replicas := int32(2)
	parallelism := int32(3)
	template := func(app string, ann map[string]string, spec corev1.PodSpec) corev1.PodTemplateSpec {
		spec.SchedulerName = "tessera"
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: ann}, Spec: spec}
	}
	deployment := func(name string, tmpl corev1.PodTemplateSpec) {
		t.Helper()
		_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A HAMi Deployment: two containers, an init container, model and
	// policy annotations on the template.
	deployment("infer", template("infer", map[string]string{
		"nvidia.com/use-gputype": "H100", "hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "spread"},
		corev1.PodSpec{InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox"}},
			Containers: []corev1.Container{ctr("infer", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "8000", "nvidia.com/gpucores", "25")),
				ctr("metrics", limits("cpu", "100m"))}}))
	// nvshare's notebooks (docs/migration.md's worked migration).
	deployment("notebooks", template("notebooks", nil, corev1.PodSpec{Containers: []corev1.Container{ctr("jupyter", limits("nvshare.com/gpu", "1"))}}))
	// A KAI Job: the fraction goes to the named container, the gang
	// minimum stays on the Job for the scheduler.
	_, err = client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hpo", Namespace: ns, Annotations: map[string]string{"kai.scheduler/batch-min-member": "2"}},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: template("hpo",
			map[string]string{"gpu-fraction": "0.5", "gpu-fraction-container-name": "trainer"},
			corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{ctr("log-shipper", limits("cpu", "100m")), ctr("trainer", corev1.ResourceRequirements{})}})},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Volcano-resources Job (vGPU device plugin keys in a plain Job).
	_, err = client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "embed", Namespace: ns},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: template("embed", nil, corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{ctr("embed", limits("volcano.sh/vgpu-number", "1", "volcano.sh/vgpu-memory", "4000", "volcano.sh/vgpu-cores", "20"))}})},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Jobs as Kueue counts them: the stored template carries
	// tessera.io/gpu-milli, written by the webhook from the template's keys
	// (Tessera's own, or KAI's and Volcano's above, translated), and a wrong
	// one is refused with kube/workload's message.
	suspend := true
	_, err = client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "quarter", Namespace: ns},
		Spec: batchv1.JobSpec{Suspend: &suspend, Template: template("quarter", map[string]string{workload.AnnotationCompute: "0.25"},
			corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{ctr("main", limits(workload.ResourceGPU, "1"))}})},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for job, want := range map[string]map[string]int64{"quarter": {"main": 250}, "hpo": {"trainer": 500, "log-shipper": 0}, "embed": {"embed": 200}} {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range j.Spec.Template.Spec.Containers {
			lim, inLim := c.Resources.Limits[workload.ResourceGPUMilli]
			req := c.Resources.Requests[workload.ResourceGPUMilli]
			if w := want[c.Name]; (w == 0) == inLim || lim.Value() != w || req.Value() != w {
				t.Errorf("Job %s container %s: %s limit %s, request %s; want %d", job, c.Name, workload.ResourceGPUMilli, lim.String(), req.String(), w)
			}
		}
	}
	_, err = client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "lies", Namespace: ns},
		Spec: batchv1.JobSpec{Suspend: &suspend, Template: template("lies", map[string]string{workload.AnnotationCompute: "0.25"},
			corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{ctr("main", limits(workload.ResourceGPU, "1", workload.ResourceGPUMilli, "1000"))}})},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "resource tessera.io/gpu-milli of container main: must equal the thousandths of GPU compute the container asks, 250") {
		t.Errorf("a Job with a wrong gpu-milli: error %v, want the webhook's refusal", err)
	}

	for _, w := range []struct {
		app, owner string // the pods' label, their controller's kind
		pods       int
		tc         migrationCase
	}{
		{"infer", "ReplicaSet", int(replicas), migrationCase{policy: "spread", want: map[string]request.GPU{
			"infer": {Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 8000, Models: []string{"H100-NVL", "H100-PCIe", "H100-SXM"}}}}},
		{"notebooks", "ReplicaSet", int(replicas), migrationCase{want: map[string]request.GPU{
			"jupyter": {Count: 1, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}},
			ann: map[string]string{workload.AnnotationOversubscribe: "true", AnnotationMigratedFrom: "jupyter:nvshare.com/gpu=1"}}},
		{"hpo", "Job", int(parallelism), migrationCase{want: map[string]request.GPU{"trainer": {Count: 1, ComputeMilli: 500, ComputeLimitMilli: 1000}},
			ann: map[string]string{AnnotationMigratedFrom: "gpu-fraction-container-name=trainer,gpu-fraction=0.5"}}},
		{"embed", "Job", int(parallelism), migrationCase{want: map[string]request.GPU{"embed": {Count: 1, ComputeMilli: 200, ComputeLimitMilli: 200, MemoryMiB: 4000}}}},
	} {
		t.Run(w.app, func(t *testing.T) {
			var got []corev1.Pod
			waitUntil := time.Now().Add(60 * time.Second) // a liveness bound for the controllers, not a performance one
			for {
				list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.app})
				if err != nil {
					t.Fatal(err)
				}
				if got = list.Items; len(got) >= w.pods {
					break
				}
				if time.Now().After(waitUntil) {
					t.Fatalf("%d pods of %s, want %d (%s)", len(got), w.app, w.pods, controllerEvents(t, client, ns))
				}
				time.Sleep(200 * time.Millisecond)
			}
			for i := range got {
				p := &got[i]
				if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != w.owner {
					t.Errorf("pod %s: controller %+v, want a %s", p.Name, ref, w.owner)
				}
				checkMigrated(t, w.tc, p, cat)
				if w.app == "infer" && (len(p.Spec.InitContainers) != 1 || len(p.Spec.InitContainers[0].Resources.Limits) != 0) {
					t.Errorf("init container changed: %+v", p.Spec.InitContainers)
				}
			}
		})
	}

	t.Run("JobSets", func(t *testing.T) { checkJobSets(t, cfg, ns) })

	// A namespace's ResourceQuota counts a share as the webhook writes it
	// into each pod: 1000 thousandths of GPU hold four quarter-GPU pods,
	// in Tessera's keys or HAMi's, and refuse a fifth, and a whole GPU.
	t.Run("resource quota", func(t *testing.T) {
		const qns = "quota"
		createNamespace(t, client, qns)
		hard := corev1.ResourceName("requests." + workload.ResourceGPUMilli)
		if _, err := client.CoreV1().ResourceQuotas(qns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: qns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{hard: resource.MustParse("1000")}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		quarters := []*corev1.Pod{
			testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))),
			testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))),
			testPod(nil, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "4000", "nvidia.com/gpucores", "25"))),
			testPod(map[string]string{"gpu-fraction": "0.25"}),
		}
		for i, p := range quarters {
			p.Name, p.Namespace = fmt.Sprintf("quarter-%d", i), qns
			// The quota admits nothing until its controller has counted
			// the namespace (a liveness bound, not a performance one).
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				_, err := client.CoreV1().Pods(qns).Create(ctx, p, metav1.CreateOptions{})
				if err == nil {
					break
				}
				if i > 0 || !strings.Contains(err.Error(), "status unknown for quota") || time.Now().After(deadline) {
					t.Fatalf("pod %s (a quarter GPU within the quota): %v", p.Name, err)
				}
			}
		}
		for name, p := range map[string]*corev1.Pod{
			"a fifth quarter": testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))),
			"a whole GPU":     testPod(nil, ctr("main", limits("nvidia.com/gpu", "1"))),
		} {
			p.Name, p.Namespace = "over", qns
			_, err := client.CoreV1().Pods(qns).Create(ctx, p, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), string(hard)) {
				t.Errorf("%s past a quota of 1000 with 1000 used: error %v, want exceeded quota on %s", name, err, hard)
			}
		}
	})
}

// createNamespace creates ns and waits for its default service account,
// which pods need and the service-account controller creates.
func createNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no default service account in %s: %v", ns, err)
		}
	}
}

// controllerEvents lists a namespace's warning events, to say why a
// controller made no pods.
func controllerEvents(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	evs, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.InvolvedObject.Name+": "+e.Message)
	}
	return strings.Join(out, "; ")
}
