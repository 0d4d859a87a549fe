package queues

import (
	"context"
	_ "embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
)

// LabelQueue is the pod label naming its queue; pods without it join
// queueing.DefaultQueue.
const LabelQueue = "tessera.io/queue"

// manifest is the Queue CRD; deploy/crds/tessera.io_queues.yaml is the same
// file for kubectl users (a test keeps them equal).
//
//go:embed crd.yaml
var manifest []byte

// Manifest returns a copy of the Queue CRD manifest (YAML).
func Manifest() []byte { return append([]byte(nil), manifest...) }

// Resource is the Queue resource (cluster-scoped).
func Resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "queues"}
}

// InstallCRD creates or updates the Queue CRD and waits until it is served.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	return crd.Install(ctx, dyn, manifest)
}

// FromObject converts a Queue object; errors name the queue and the field.
func FromObject(u *unstructured.Unstructured) (queueing.Queue, error) {
	q := queueing.Queue{Name: u.GetName()}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	fail := func(field, allowed string, v any) (queueing.Queue, error) {
		return queueing.Queue{}, fmt.Errorf("queue %s: spec.%s: must be %s, got %v", q.Name, field, allowed, v)
	}
	if v, ok := spec["parent"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return fail("parent", "a queue name", v)
		}
		q.Parent = s
	}
	for _, f := range []struct {
		name string
		dst  *int32
	}{{"priority", &q.Priority}, {"weight", &q.Weight}} {
		if v, ok := spec[f.name]; ok {
			n, isInt := v.(int64)
			if !isInt || n < -1<<31 || n > 1<<31-1 {
				return fail(f.name, "a 32-bit whole number", v)
			}
			*f.dst = int32(n)
		}
	}
	var err error
	if q.Guaranteed, err = amounts(spec, "guaranteed"); err != nil {
		return queueing.Queue{}, fmt.Errorf("queue %s: %w", q.Name, err)
	}
	if q.Limit, err = amounts(spec, "limit"); err != nil {
		return queueing.Queue{}, fmt.Errorf("queue %s: %w", q.Name, err)
	}
	return q, nil
}

// amounts reads spec.<field>.{gpu,gpuMemory,cpu,memory}.
func amounts(spec map[string]any, field string) (queueing.Resources, error) {
	var r queueing.Resources
	m, ok := spec[field].(map[string]any)
	if !ok {
		if spec[field] != nil {
			return r, fmt.Errorf("spec.%s: must be an object", field)
		}
		return r, nil
	}
	str := func(v any) string { return fmt.Sprint(v) }
	for _, a := range []struct {
		key, allowed string
		parse        func(string) (int64, error)
		dst          *int64
	}{
		{"gpu", "a number of GPUs such as 4 or 0.5", quantity.ParseShare, &r.GPUMilli},
		{"gpuMemory", "a size such as 320Gi", quantity.ParseMiB, &r.GPUMemoryMiB},
		{"cpu", "a number of cores such as 64 or 0.5", quantity.ParseShare, &r.CPUMilli},
		{"memory", "a size such as 512Gi", quantity.ParseMiB, &r.MemoryMiB},
	} {
		v, ok := m[a.key]
		if !ok {
			continue
		}
		n, err := a.parse(str(v))
		if err != nil {
			return r, fmt.Errorf("spec.%s.%s: must be %s, got %q", field, a.key, a.allowed, str(v))
		}
		*a.dst = n
	}
	return r, nil
}
