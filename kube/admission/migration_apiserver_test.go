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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/internal/testcluster"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

// TestMigrationOnRealAPIServer creates every migration case's pod through
// a real kube-apiserver with the webhook registered (its match condition
// for foreign keys taken from MatchExpression), and the pods a Deployment's
// and a Job's controllers would create from their templates; each stored
// pod must carry the translation, or the API server must refuse it with
// the webhook's message.
func TestMigrationOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, _, cfg := testcluster.ForTest(t, false)
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
			if mc.Name == "foreign-gpu-request" {
				mwc.Webhooks[i].MatchConditions[j].Expression = MatchExpression()
			}
		}
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	const ns = "ml"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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

	// Workload controllers: the webhook sees the pods they create from
	// their templates. No controller-manager runs here, so the test creates
	// each pod from its template as the controller would.
	fromTemplate := func(name string, owner metav1.OwnerReference, tmpl corev1.PodTemplateSpec) *corev1.Pod {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.GenerateName, p.Namespace = name+"-", ns
		p.OwnerReferences = []metav1.OwnerReference{owner}
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod of %s: %v", name, err)
		}
		return got
	}
	// A HAMi Deployment: two containers, an init container, model and
	// policy annotations on the template.
	replicas := int32(2)
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "infer"}, Annotations: map[string]string{
			"nvidia.com/use-gputype": "H100", "hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "spread"}},
		Spec: corev1.PodSpec{SchedulerName: "tessera",
			InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox"}},
			Containers: []corev1.Container{ctr("infer", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "8000", "nvidia.com/gpucores", "25")),
				ctr("metrics", limits("cpu", "100m"))}},
	}
	dep, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "infer", Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "infer"}}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	depOwner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "infer-1", UID: dep.UID, Controller: &yes}
	h100 := request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 8000, Models: []string{"H100-NVL", "H100-PCIe", "H100-SXM"}}
	for i := 0; i < int(replicas); i++ {
		got := fromTemplate("infer", depOwner, dep.Spec.Template)
		checkMigrated(t, migrationCase{want: map[string]request.GPU{"infer": h100}, policy: "spread"}, got, cat)
		if len(got.Spec.InitContainers) != 1 || len(got.Spec.InitContainers[0].Resources.Limits) != 0 {
			t.Errorf("init container changed: %+v", got.Spec.InitContainers)
		}
	}
	// A KAI Job: the fraction goes to the named container, the gang
	// minimum stays for the scheduler.
	parallelism := int32(3)
	job, err := client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hpo", Namespace: ns, Annotations: map[string]string{"kai.scheduler/batch-min-member": "2"}},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kai.scheduler/queue": "research"},
				Annotations: map[string]string{"gpu-fraction": "0.5", "gpu-fraction-container-name": "trainer"}},
			Spec: corev1.PodSpec{SchedulerName: "tessera", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{ctr("log-shipper", limits("cpu", "100m")), ctr("trainer", corev1.ResourceRequirements{})}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobOwner := *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	got := fromTemplate("hpo", jobOwner, job.Spec.Template)
	checkMigrated(t, migrationCase{want: map[string]request.GPU{"trainer": {Count: 1, ComputeMilli: 500, ComputeLimitMilli: 1000}},
		ann: map[string]string{"label:kai.scheduler/queue": "research"}}, got, cat)
}
