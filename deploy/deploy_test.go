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
