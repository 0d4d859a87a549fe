package podgroups

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// VolcanoResource is Volcano's PodGroup resource (scheduling.volcano.sh,
// namespaced). Volcano's Job controller creates one per Job and writes its
// name on every pod of the Job (annotation scheduling.k8s.io/group-name);
// Tessera reads it through a dynamic client, with no Volcano Go module.
func VolcanoResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
}

// VolcanoGroup is what Tessera takes from a Volcano PodGroup.
type VolcanoGroup struct {
	Group
	// Queue is spec.queue ("" when unset: Volcano's default queue).
	Queue string
}

// FromVolcano converts a Volcano PodGroup: spec.minMember is the gang's
// minimum (0, which Volcano allows, asks for no gang: a minimum of 1 means
// the same) and spec.queue its queue. spec.minResources, minTaskMember and
// priorityClassName are not read: the gang minimum and queue are what the
// scheduler needs, and docs/migration.md says what the rest becomes.
// Errors name the group and the field.
func FromVolcano(u *unstructured.Unstructured) (VolcanoGroup, error) {
	g := VolcanoGroup{Group: Group{Namespace: u.GetNamespace(), Name: u.GetName()}}
	min, found, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	if err != nil || min < 0 || min > MaxMembers {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "minMember")
		return VolcanoGroup{}, fmt.Errorf("volcano podgroup %s/%s: spec.minMember: must be a whole number in [0, %d], got %v", g.Namespace, g.Name, MaxMembers, v)
	}
	g.MinMember = max(1, int(min))
	if !found {
		g.MinMember = 1
	}
	q, _, err := unstructured.NestedString(u.Object, "spec", "queue")
	if err != nil {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "queue")
		return VolcanoGroup{}, fmt.Errorf("volcano podgroup %s/%s: spec.queue: must be a string, got %v", g.Namespace, g.Name, v)
	}
	g.Queue = q
	return g, nil
}
