package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestManifestsAreAccepted creates every object of deploy/ on a real
// kube-apiserver with strict field validation: a typo in a manifest fails.
func TestManifestsAreAccepted(t *testing.T) {
	// deploy/crds is the chart's crds/ (a link) for kubectl users.
	if crds, err := filepath.Glob("crds/*.yaml"); err != nil || len(crds) < 3 {
		t.Fatalf("deploy/crds: %v %v", crds, err)
	}
	s := startAPIServer(t)
	// tessera.yaml first: it creates the namespace the others use.
	created := map[string]objects{}
	for _, f := range []string{"tessera.yaml", "webhook.yaml"} {
		objs, err := readManifest(f)
		if err != nil {
			t.Fatal(err)
		}
		s.create(t, f, objs)
		created[f] = objs
	}
	// The webhook's objects, its certificate made by cert-manager (a
	// static file cannot make one).
	want := []string{"ServiceAccount/tessera-webhook", "Deployment/tessera-webhook", "Service/tessera-webhook",
		"Issuer/tessera-webhook-selfsigned", "Certificate/tessera-webhook", "MutatingWebhookConfiguration/tessera-webhook"}
	if got := created["webhook.yaml"].names(); !sameSet(got, want) {
		t.Errorf("webhook.yaml holds %v, want %v", got, want)
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "DaemonSet"} {
		if len(created["tessera.yaml"].ofKind(kind)) == 0 {
			t.Errorf("tessera.yaml has no %s", kind)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// readManifest decodes every object of a multi-document YAML file.
func readManifest(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := testcluster.DecodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// TestAgentDaemonSetHostAccess: the agent runs in the host PID namespace
// (NVML reports host PIDs) and IPC namespace (MPS daemons and their
// clients share it), and sees the MPS root (--mps-root's default) at its
// host path, since containers mount pipe folders by the path the agent
// reports.
func TestAgentDaemonSetHostAccess(t *testing.T) {
	objs, err := readManifest("tessera.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() != "DaemonSet" || obj.GetName() != "tessera-agent-default" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		for _, f := range []string{"hostPID", "hostIPC"} {
			if v, _, _ := unstructured.NestedBool(spec, f); !v {
				t.Errorf("agent DaemonSet: %s must be true", f)
			}
		}
		const mpsRoot = "/run/tessera/mps"
		volume := ""
		vols, _, _ := unstructured.NestedSlice(spec, "volumes")
		for _, v := range vols {
			if p, _, _ := unstructured.NestedString(v.(map[string]any), "hostPath", "path"); p == mpsRoot {
				volume, _, _ = unstructured.NestedString(v.(map[string]any), "name")
			}
		}
		containers, _, _ := unstructured.NestedSlice(spec, "containers")
		mounted := false
		for _, c := range containers {
			mounts, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
			for _, m := range mounts {
				name, _, _ := unstructured.NestedString(m.(map[string]any), "name")
				path, _, _ := unstructured.NestedString(m.(map[string]any), "mountPath")
				mounted = mounted || (volume != "" && name == volume && path == mpsRoot)
			}
		}
		if !mounted {
			t.Errorf("agent DaemonSet: host folder %s must be mounted at the same path", mpsRoot)
		}
		return
	}
	t.Fatal("no tessera-agent-default DaemonSet in tessera.yaml")
}
