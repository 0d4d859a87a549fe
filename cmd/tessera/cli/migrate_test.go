package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// upstreamObjects are written from KAI's and Volcano's documented fields.
const upstreamObjects = `
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  parentQueue: department-a
  resources:
    gpu: {quota: 4, limit: 8, overQuotaWeight: 2}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: department-a}
spec:
  weight: 1
  capability: {nvidia.com/gpu: "16"}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: job-1, namespace: ml}
spec: {minMember: 3, queue: research}
`

func TestMigrateFromFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "upstream.yaml")
	if err := os.WriteFile(path, []byte(upstreamObjects), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "migrate", "-f", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"apiVersion: tessera.io/v1alpha1\nkind: Queue\nmetadata:\n  name: research\nspec:\n  guaranteed:\n    gpu: \"4\"\n  limit:\n    gpu: \"8\"\n  parent: department-a\n  weight: 2\n",
		"kind: Queue\nmetadata:\n  name: department-a\nspec:\n  limit:\n    gpu: \"16\"\n  weight: 1\n",
		"kind: PodGroup\nmetadata:\n  name: job-1\n  namespace: ml\nspec:\n  minMember: 3\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks\n%s\ngot\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "not carried over: PodGroup ml/job-1: spec.queue: a Tessera PodGroup has no queue: label its pods tessera.io/queue: research") {
		t.Errorf("report:\n%s", errOut)
	}
	_, errOut, code = run(t, "migrate", "-f", path, "--dry-run")
	if code != exitUsage || !strings.Contains(errOut, "--dry-run: applies only with --apply") {
		t.Errorf("--dry-run alone: exit %d, %s", code, errOut)
	}
	_, errOut, code = run(t, "migrate", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	if code == 0 || !strings.Contains(errOut, "-f: open") {
		t.Errorf("missing file: exit %d, %s", code, errOut)
	}
}

// upstreamCRDs are minimal CRDs for the upstream kinds, enough to create
// their objects.
func upstreamCRD(group, version, plural, kind, scope string) []byte {
	return []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ` + plural + `.` + group + `}
spec:
  group: ` + group + `
  scope: ` + scope + `
  names: {plural: ` + plural + `, kind: ` + kind + `}
  versions:
    - name: ` + version + `
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
}

// TestMigrateFromCluster reads KAI and Volcano objects from a real API
// server and applies the Tessera objects (a dry run first).
func TestMigrateFromCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, c, cfg := testcluster.ForTest(t, false)
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, m := range [][]byte{
		upstreamCRD("scheduling.run.ai", "v2", "queues", "Queue", "Cluster"),
		upstreamCRD("scheduling.volcano.sh", "v1beta1", "queues", "Queue", "Cluster"),
		upstreamCRD("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", "Namespaced"),
		queues.Manifest(), podgroups.Manifest(),
	} {
		if err := crd.Install(ctx, dyn, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "upstream.yaml")
	if err := os.WriteFile(path, []byte(upstreamObjects), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := readObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
		gvr := gv.WithResource(strings.ToLower(o.GetKind()) + "s")
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(gvr).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	out, errOut, code := run(t, "migrate", "--kubeconfig", c.Kubeconfig, "--apply", "--dry-run")
	if code != 0 || !strings.Contains(out, "queue research created (dry run)") || !strings.Contains(out, "podgroup ml/job-1 created (dry run)") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := dyn.Resource(queues.Resource()).Get(ctx, "research", metav1.GetOptions{}); err == nil {
		t.Fatal("the dry run stored queue research")
	}
	out, errOut, code = run(t, "migrate", "--kubeconfig", c.Kubeconfig, "--apply")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	q, err := dyn.Resource(queues.Resource()).Get(ctx, "research", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if parent, _, _ := unstructured.NestedString(q.Object, "spec", "parent"); parent != "department-a" {
		t.Errorf("queue research: parent %q", parent)
	}
	g, err := dyn.Resource(podgroups.Resource()).Namespace("ml").Get(ctx, "job-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(g.Object, "spec", "minMember"); n != 3 {
		t.Errorf("podgroup ml/job-1: minMember %d", n)
	}
	// A second run updates.
	out, _, code = run(t, "migrate", "--kubeconfig", c.Kubeconfig, "--apply")
	if code != 0 || !strings.Contains(out, "queue research updated") {
		t.Errorf("second apply: exit %d\n%s", code, out)
	}
}
