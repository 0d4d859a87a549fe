package crd

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// Install creates or updates the CRD in manifest (YAML) and waits until
// the API server serves it (ctx bounds the wait).
func Install(ctx context.Context, dyn dynamic.Interface, manifest []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return fmt.Errorf("CRD manifest: %w", err)
	}
	want := &unstructured.Unstructured{Object: obj}
	client := dyn.Resource(crdResource())
	cur, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := client.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", want.GetName(), err)
		}
	case err != nil:
		return fmt.Errorf("get CRD %s: %w", want.GetName(), err)
	default:
		want.SetResourceVersion(cur.GetResourceVersion())
		if _, err := client.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update CRD %s: %w", want.GetName(), err)
		}
	}
	for {
		cur, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
		if err == nil && established(cur) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", want.GetName(), ctx.Err())
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
