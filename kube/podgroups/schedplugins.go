package podgroups

import (
	_ "embed"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// schedulerPluginsManifest is a CRD for scheduler-plugins' PodGroup with
// the fields Tessera reads (written from its documented schema: the
// sigs.k8s.io/scheduler-plugins module is not a dependency), for clusters
// and tests without scheduler-plugins' own manifests.
//
//go:embed schedplugins_crd.yaml
var schedulerPluginsManifest []byte

// SchedulerPluginsManifest returns a copy of that CRD manifest (YAML).
func SchedulerPluginsManifest() []byte { return append([]byte(nil), schedulerPluginsManifest...) }

// SchedulerPluginsResource is scheduler-plugins' PodGroup resource
// (scheduling.x-k8s.io, namespaced), the coscheduling plugin's gang.
// Pods join with the label scheduling.x-k8s.io/pod-group (Kubeflow's
// training operator and JobSet write both); Tessera reads it through a
// dynamic client.
func SchedulerPluginsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
}

// FromSchedulerPlugins converts a scheduler-plugins PodGroup:
// spec.minMember is the gang's minimum (0, which its schema allows, asks
// for no gang: a minimum of 1 means the same) and
// spec.scheduleTimeoutSeconds how long it may fail to fit before its
// members say so (unset: never). spec.minResources is not read: Tessera
// checks that the members themselves fit. Errors name the group and the
// field.
func FromSchedulerPlugins(u *unstructured.Unstructured) (Group, error) {
	g := Group{Namespace: u.GetNamespace(), Name: u.GetName()}
	fail := func(field, allowed string) (Group, error) {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", field)
		return Group{}, fmt.Errorf("scheduler-plugins podgroup %s/%s: spec.%s: must be %s, got %v", g.Namespace, g.Name, field, allowed, v)
	}
	min, _, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	if err != nil || min < 0 || min > MaxMembers {
		return fail("minMember", fmt.Sprintf("a whole number in [0, %d]", MaxMembers))
	}
	g.MinMember = max(1, int(min))
	secs, _, err := unstructured.NestedInt64(u.Object, "spec", "scheduleTimeoutSeconds")
	if err != nil || secs < 0 {
		return fail("scheduleTimeoutSeconds", "a whole number of seconds >= 0")
	}
	g.Timeout = time.Duration(secs) * time.Second
	return g, nil
}
