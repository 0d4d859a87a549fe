package queues

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/tessera-gpu/tessera/kube/crd"
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

// FromObject converts a Queue object with the same rules as the host
// daemon's queue file (queueing.Spec); errors name the queue and the field.
func FromObject(u *unstructured.Unstructured) (queueing.Queue, error) {
	name := u.GetName()
	raw, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	spec := queueing.Spec{Name: name}
	if raw != nil {
		b, err := json.Marshal(raw)
		if err != nil {
			return queueing.Queue{}, fmt.Errorf("queue %s: spec: %w", name, err)
		}
		if err := json.Unmarshal(b, &spec); err != nil {
			return queueing.Queue{}, fmt.Errorf("queue %s: %s", name, describe(err))
		}
		spec.Name = name // spec.name is not a field of the resource
	}
	q, err := spec.Queue("spec")
	if err != nil {
		return queueing.Queue{}, fmt.Errorf("queue %s: %w", name, err)
	}
	return q, nil
}

// describe turns a JSON decoding error into "spec.FIELD: must be ...".
func describe(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "spec: " + err.Error()
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Int64, reflect.Int32, reflect.Int:
		want = "a whole number"
	}
	return fmt.Sprintf("spec.%s: must be %s, got a %s", te.Field, want, te.Value)
}

// Tree builds the queue tree from Queue objects. Objects that cannot be
// converted are left out, each with its error in skipped; if the rest are
// inconsistent (a cycle, an unknown parent) only the default queue
// remains, and err says why.
func Tree(objs []*unstructured.Unstructured) (t *queueing.Tree, skipped []error, err error) {
	var qs []queueing.Queue
	for _, o := range objs {
		q, err := FromObject(o)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b queueing.Queue) int { return strings.Compare(a.Name, b.Name) })
	if t, err = queueing.NewTree(qs); err != nil {
		def, _ := queueing.NewTree(nil)
		return def, skipped, err
	}
	return t, skipped, nil
}
