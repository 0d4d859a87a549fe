package podgroups

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WorkloadResource is Kubernetes' own PodGroup (scheduling.k8s.io, the
// Workload API, namespaced): served by kube-apiserver v1.37 in v1beta1
// with the GenericWorkload feature gate and
// --runtime-config=scheduling.k8s.io/v1beta1=true. Workload controllers
// create one per running group from a Workload's template (the Job
// controller, with the WorkloadWithJob gate, for Jobs) and name it in each
// pod's spec.schedulingGroup.podGroupName. Tessera reads it through a
// dynamic client, so that a cluster without the gate sees no failing
// watch, converted into the typed object of k8s.io/api.
func WorkloadResource() schema.GroupVersionResource {
	return schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
}

// WorkloadGroup is what Tessera takes from a Workload API PodGroup.
type WorkloadGroup struct {
	Group
	// Gang is whether spec.schedulingPolicy is gang (all or nothing);
	// false for the basic policy, pod-by-pod scheduling.
	Gang bool
}

// FromWorkload converts a Workload API PodGroup: with the gang policy,
// spec.schedulingPolicy.gang.minCount is the gang's minimum; with the basic
// one it is no gang. The policy cannot change after creation; minCount
// can (a Job's elastic resize). Errors name the group and the field.
func FromWorkload(u *unstructured.Unstructured) (WorkloadGroup, error) {
	var pg schedulingv1beta1.PodGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pg); err != nil {
		return WorkloadGroup{}, fmt.Errorf("podgroup %s/%s (scheduling.k8s.io): %w", u.GetNamespace(), u.GetName(), err)
	}
	g := WorkloadGroup{Group: Group{Namespace: pg.Namespace, Name: pg.Name, MinMember: 1}}
	gang := pg.Spec.SchedulingPolicy.Gang
	if gang == nil {
		return g, nil
	}
	if gang.MinCount < 1 || gang.MinCount > MaxMembers {
		return WorkloadGroup{}, fmt.Errorf("podgroup %s/%s (scheduling.k8s.io): spec.schedulingPolicy.gang.minCount: must be a whole number in [1, %d], got %d", g.Namespace, g.Name, MaxMembers, gang.MinCount)
	}
	g.Gang, g.MinMember = true, int(gang.MinCount)
	return g, nil
}
