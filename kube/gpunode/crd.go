package gpunode

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// manifest is the GPUNode CRD; deploy/crds/tessera.io_gpunodes.yaml is the
// same file for kubectl users (a test keeps them equal).
//
//go:embed crd.yaml
var manifest []byte

// Manifest returns a copy of the GPUNode CRD manifest (YAML).
func Manifest() []byte { return append([]byte(nil), manifest...) }

// Resource is the GPUNode resource (cluster-scoped).
func Resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "gpunodes"}
}

func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// InstallCRD creates or updates the GPUNode CRD and waits until the API
// server serves it (ctx bounds the wait).
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return fmt.Errorf("GPUNode CRD manifest: %w", err)
	}
	want := &unstructured.Unstructured{Object: obj}
	client := dyn.Resource(crdResource())
	cur, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := client.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create GPUNode CRD: %w", err)
		}
	case err != nil:
		return fmt.Errorf("get GPUNode CRD: %w", err)
	default:
		want.SetResourceVersion(cur.GetResourceVersion())
		if _, err := client.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update GPUNode CRD: %w", err)
		}
	}
	for {
		cur, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
		if err == nil && established(cur) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GPUNode CRD not established: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
