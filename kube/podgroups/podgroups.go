package podgroups

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/tessera-gpu/tessera/kube/crd"
)

// MaxMembers bounds minMember.
const MaxMembers = 10000

// manifest is the PodGroup CRD; deploy/crds/tessera.io_podgroups.yaml is
// the same file for kubectl users (a test keeps them equal).
//
//go:embed crd.yaml
var manifest []byte

// Manifest returns a copy of the PodGroup CRD manifest (YAML).
func Manifest() []byte { return append([]byte(nil), manifest...) }

// Resource is the PodGroup resource (namespaced).
func Resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "podgroups"}
}

// InstallCRD creates or updates the PodGroup CRD and waits until it is served.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	return crd.Install(ctx, dyn, manifest)
}

// Group is a PodGroup's scheduling terms.
type Group struct {
	Namespace, Name string
	MinMember       int
	// Timeout is how long the gang may fail to fit before its members say
	// so (0: never).
	Timeout time.Duration
}

// FromObject converts a PodGroup object; errors name the group and field.
func FromObject(u *unstructured.Unstructured) (Group, error) {
	g := Group{Namespace: u.GetNamespace(), Name: u.GetName()}
	fail := func(field, allowed string, v any) (Group, error) {
		return Group{}, fmt.Errorf("podgroup %s/%s: spec.%s: must be %s, got %v", g.Namespace, g.Name, field, allowed, v)
	}
	min, found, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	if err != nil || !found || min < 1 || min > MaxMembers {
		return fail("minMember", fmt.Sprintf("a whole number in [1, %d]", MaxMembers), u.Object["spec"])
	}
	g.MinMember = int(min)
	secs, found, err := unstructured.NestedInt64(u.Object, "spec", "scheduleTimeoutSeconds")
	if err != nil || (found && secs < 0) {
		return fail("scheduleTimeoutSeconds", "a whole number of seconds >= 0", u.Object["spec"])
	}
	g.Timeout = time.Duration(secs) * time.Second
	return g, nil
}
