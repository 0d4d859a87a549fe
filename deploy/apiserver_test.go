package deploy

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// auditPolicy records every request's metadata, for the RBAC check.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`

// apiServer is a real control plane with the chart's CRDs and the stand-in
// CRDs of cert-manager and the Prometheus Operator installed.
type apiServer struct {
	ctx    context.Context
	c      *testcluster.Cluster
	cfg    *rest.Config
	dyn    dynamic.Interface
	core   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	ctx, c, cfg := testcluster.ForTestWith(t, false, testcluster.Options{AuditPolicy: auditPolicy})
	s := &apiServer{ctx: ctx, c: c, cfg: cfg, dyn: dynamic.NewForConfigOrDie(cfg), core: kubernetes.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))}
	crds, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil || len(crds) < 3 {
		t.Fatalf("chart CRDs: %v %v", crds, err)
	}
	// Stand-ins for other projects' CRDs (testdata/stub-crds.yaml says why).
	for _, f := range append(crds, "testdata/stub-crds.yaml") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := testcluster.DecodeManifests(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, obj := range objs {
			if err := crd.Install(ctx, s.dyn, mustYAML(t, obj)); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	s.mapper.Reset()
	return s
}

func mustYAML(t *testing.T, obj *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// create creates every object with strict field validation: an unknown or
// misspelt field fails.
func (s *apiServer) create(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", what, gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = s.dyn.Resource(m.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			ri = s.dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(s.ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("%s: create %s %s: %v", what, gvk.Kind, obj.GetName(), err)
		}
	}
}

func (s *apiServer) createNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := s.core.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestChartOnAPIServer creates the chart's objects on a real API server:
// every value set (strict field validation), an install and an upgrade
// with helm itself (the webhook certificate survives), and the scheduler
// and agent at work under the chart's RBAC alone.
func TestChartOnAPIServer(t *testing.T) {
	h := newHelm(t)
	s := startAPIServer(t)
	t.Run("value sets are accepted", func(t *testing.T) {
		for _, vs := range valueSets {
			// Each set is its own release (cluster-scoped names differ)
			// in its own namespace.
			ns := "vs-" + vs.name
			objs, err := h.template(t, vs.name, ns, vs)
			if err != nil {
				t.Fatal(err)
			}
			s.createNamespace(t, ns)
			s.create(t, vs.name, objs)
		}
	})
	t.Run("upgrade keeps the webhook certificate", func(t *testing.T) { testUpgradeKeepsCertificate(t, h, s) })
	t.Run("RBAC is enough", func(t *testing.T) { testRBAC(t, s) })
}

// testUpgradeKeepsCertificate installs the chart with helm, upgrades it,
// and checks that the serving certificate and the caBundle stayed, while a
// render without the cluster (no lookup) would have made new ones.
func testUpgradeKeepsCertificate(t *testing.T, h helmCLI, s *apiServer) {
	const rel, ns = "tessera", "upgrade-test"
	kube := []string{"--kubeconfig", s.c.Kubeconfig, "--namespace", ns}
	if _, err := h.run(append([]string{"install", rel, chartDir, "--create-namespace"}, kube...)...); err != nil {
		t.Fatal(err)
	}
	before := s.webhookTLS(t, ns)
	if err := verifyCert(before["tls.crt"], before["ca.crt"], "tessera-webhook."+ns+".svc"); err != nil {
		t.Fatal(err)
	}
	if string(before["caBundle"]) != string(before["ca.crt"]) {
		t.Fatal("after install, the webhook configuration's caBundle differs from the Secret's ca.crt")
	}
	if _, err := h.run(append([]string{"upgrade", rel, chartDir, "--set", "webhook.replicas=3"}, kube...)...); err != nil {
		t.Fatal(err)
	}
	after := s.webhookTLS(t, ns)
	for k, v := range before {
		if string(after[k]) != string(v) {
			t.Errorf("helm upgrade changed the webhook's %s", k)
		}
	}
	d, err := s.core.AppsV1().Deployments(ns).Get(s.ctx, "tessera-webhook", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("the upgrade did not apply (replicas %v): %v", d.Spec.Replicas, err)
	}
	// Without the cluster, lookup finds nothing and a new CA is made: the
	// certificate above survived because of lookup, not by chance.
	objs, err := h.template(t, rel, ns, valueSet{name: "offline"})
	if err != nil {
		t.Fatal(err)
	}
	ca, _, _ := unstructured.NestedString(objects(objs).get(t, "Secret", "tessera-webhook-tls").Object, "data", "ca.crt")
	if ca == base64.StdEncoding.EncodeToString(before["ca.crt"]) {
		t.Error("an offline render reproduced the installed CA; the test cannot tell lookup from chance")
	}
}

// webhookTLS reads the webhook Secret's files and the configuration's caBundle.
func (s *apiServer) webhookTLS(t *testing.T, ns string) map[string][]byte {
	t.Helper()
	sec, err := s.core.CoreV1().Secrets(ns).Get(s.ctx, "tessera-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := s.core.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(s.ctx, "tessera-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{"caBundle": mwc.Webhooks[0].ClientConfig.CABundle}
	for _, h := range mwc.Webhooks[1:] {
		if string(h.ClientConfig.CABundle) != string(out["caBundle"]) {
			t.Errorf("webhook %s has another caBundle than %s", h.Name, mwc.Webhooks[0].Name)
		}
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(sec.Data[k]) == 0 {
			t.Fatalf("Secret lacks %s", k)
		}
		out[k] = sec.Data[k]
	}
	return out
}
