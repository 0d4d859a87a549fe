package kueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/admission"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// serveWebhook serves Tessera's admission webhook on loopback and
// registers it with the API server for Jobs only, with deploy/webhook.yaml's
// Job rule and match conditions (the pod rule is not needed: a Job's pods
// inherit its patched template). It returns once the API server calls it.
func serveWebhook(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	certFile, keyFile, caPEM := selfSigned(t)
	h, err := admission.New(admission.Config{SchedulerName: scheduler.DefaultName, Catalog: catalog.Default(),
		Log: slog.New(slog.NewTextHandler(testcluster.LogWriter{T: t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admission.NewServer(admission.ServerConfig{CertFile: certFile, KeyFile: keyFile, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook: %v", err)
		}
	})

	mwc := jobWebhookFromManifest(t)
	url := "https://" + ln.Addr().String() + "/mutate"
	mwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	// The API server loads the configuration asynchronously: a dry-run
	// Job tells when it calls the webhook.
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{workload.AnnotationCompute: "0.5"}},
			Spec: corev1.PodSpec{SchedulerName: scheduler.DefaultName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}},
		}},
	}
	waitFor(t, "the API server calling the webhook for Jobs", func() error {
		j, err := client.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if _, ok := j.Spec.Template.Spec.Containers[0].Resources.Limits[workload.ResourceGPUMilli]; !ok {
			return errors.New("the dry-run Job's template has no " + workload.ResourceGPUMilli)
		}
		return nil
	})
}

// jobWebhookFromManifest is deploy/webhook.yaml's webhook configuration
// with only its webhook for batch/v1 Jobs.
func jobWebhookFromManifest(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	mwc, err := testcluster.WebhookFromManifest("../../deploy/webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mwc.Annotations = nil
	for _, w := range mwc.Webhooks {
		for _, r := range w.Rules {
			if len(r.APIGroups) == 1 && r.APIGroups[0] == "batch" && len(r.Resources) == 1 && r.Resources[0] == "jobs" {
				mwc.Webhooks = []admissionregistrationv1.MutatingWebhook{w}
				return mwc
			}
		}
	}
	t.Fatal("deploy/webhook.yaml has no webhook for batch/v1 jobs")
	return nil
}

// selfSigned is a serving certificate for 127.0.0.1, its own CA
// (testcluster.SelfSigned).
func selfSigned(t *testing.T) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	certFile, keyFile, caPEM, err := testcluster.SelfSigned(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, caPEM
}

// checkGPUMilli checks that the stored Job's one container asks want
// tessera.io/gpu-milli, in its limits and requests.
func checkGPUMilli(ctx context.Context, client kubernetes.Interface, job string, want int64) error {
	j, err := client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		return err
	}
	r := j.Spec.Template.Spec.Containers[0].Resources
	lim, req := r.Limits[workload.ResourceGPUMilli], r.Requests[workload.ResourceGPUMilli]
	if lim.Value() != want || req.Value() != want {
		return fmt.Errorf("Job %s: %s limit %s, request %s; want %d", job, workload.ResourceGPUMilli, lim.String(), req.String(), want)
	}
	return nil
}
