package gpunode

import (
	"context"
	_ "embed"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/tessera-gpu/tessera/kube/crd"
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

// InstallCRD creates or updates the GPUNode CRD and waits until the API
// server serves it (ctx bounds the wait).
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	return crd.Install(ctx, dyn, manifest)
}
