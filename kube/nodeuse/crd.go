package nodeuse

import (
	"context"
	_ "embed"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/tessera-gpu/tessera/kube/crd"
)

// manifest is the GPUUse CRD; deploy/crds/tessera.io_gpuuses.yaml is the
// same file for kubectl users (a test keeps them equal).
//
//go:embed crd.yaml
var manifest []byte

// Manifest returns a copy of the GPUUse CRD manifest (YAML).
func Manifest() []byte { return append([]byte(nil), manifest...) }

// Resource is the GPUUse resource (cluster-scoped).
func Resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "gpuuses"}
}

// InstallCRD creates or updates the GPUUse CRD and waits until the API
// server serves it (ctx bounds the wait).
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	return crd.Install(ctx, dyn, manifest)
}
