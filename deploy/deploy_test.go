package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/tessera-gpu/tessera/internal/testcluster"
	"github.com/tessera-gpu/tessera/kube/crd"
)

// TestManifestsAreAccepted creates every object of deploy/ on a real
// kube-apiserver with strict field validation: a typo in a manifest fails.
func TestManifestsAreAccepted(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, false)
	dyn := dynamic.NewForConfigOrDie(cfg)
	crds, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(crds) < 3 {
		t.Fatalf("CRDs: %v %v", crds, err)
	}
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := crd.Install(ctx, dyn, data); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	// tessera.yaml first: it creates the namespace the others use.
	created := map[string]int{}
	for _, f := range []string{"tessera.yaml", "webhook.yaml"} {
		objs, err := readManifest(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s %s: %v", f, gvk.Kind, obj.GetName(), err)
			}
			r := dyn.Resource(m.Resource)
			var ri dynamic.ResourceInterface = r
			if ns := obj.GetNamespace(); ns != "" {
				ri = r.Namespace(ns)
			}
			if _, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatalf("%s: create %s %s: %v", f, gvk.Kind, obj.GetName(), err)
			}
			created[f]++
		}
	}
	if created["webhook.yaml"] != 4 {
		t.Fatalf("created %d objects of webhook.yaml, want 4 (service account, deployment, service, webhook configuration)", created["webhook.yaml"])
	}
	if created := created["tessera.yaml"]; created < 9 {
		t.Fatalf("created %d objects, want the whole manifest", created)
	}
}

// readManifest decodes every object of a multi-document YAML file.
func readManifest(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, &obj)
		}
	}
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
		if obj.GetKind() != "DaemonSet" || obj.GetName() != "tessera-agent" {
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
	t.Fatal("no tessera-agent DaemonSet in tessera.yaml")
}
