package podgroups

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestFromSchedulerPlugins(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": "pg", "namespace": "ns"}, "spec": spec}}
	}
	for _, tc := range []struct {
		spec map[string]any
		want Group
	}{
		{map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(60), "minResources": map[string]any{"cpu": "3"}},
			Group{Namespace: "ns", Name: "pg", MinMember: 3, Timeout: time.Minute}},
		{map[string]any{"minMember": int64(0)}, Group{Namespace: "ns", Name: "pg", MinMember: 1}},
		{map[string]any{}, Group{Namespace: "ns", Name: "pg", MinMember: 1}},
	} {
		g, err := FromSchedulerPlugins(obj(tc.spec))
		if err != nil || g != tc.want {
			t.Errorf("FromSchedulerPlugins(%v) = %+v, %v; want %+v", tc.spec, g, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"minMember": int64(-1)}, "scheduler-plugins podgroup ns/pg: spec.minMember: must be a whole number in [0, 10000], got -1"},
		{map[string]any{"minMember": int64(10001)}, "spec.minMember: must be a whole number in [0, 10000], got 10001"},
		{map[string]any{"minMember": "two"}, "spec.minMember: must be a whole number in [0, 10000], got two"},
		{map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(-5)}, "spec.scheduleTimeoutSeconds: must be a whole number of seconds >= 0, got -5"},
	} {
		if _, err := FromSchedulerPlugins(obj(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSchedulerPlugins(%v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestSchedulerPluginsManifest: the CRD names the resource Tessera watches.
func TestSchedulerPluginsManifest(t *testing.T) {
	var crd struct {
		Metadata struct{ Name string }
		Spec     struct {
			Group    string
			Scope    string
			Names    struct{ Plural string }
			Versions []struct{ Name string }
		}
	}
	if err := yaml.Unmarshal(SchedulerPluginsManifest(), &crd); err != nil {
		t.Fatal(err)
	}
	gvr := SchedulerPluginsResource()
	if crd.Metadata.Name != gvr.Resource+"."+gvr.Group || crd.Spec.Group != gvr.Group || crd.Spec.Names.Plural != gvr.Resource ||
		crd.Spec.Scope != "Namespaced" || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != gvr.Version {
		t.Errorf("CRD %+v does not serve %v (namespaced)", crd, gvr)
	}
}

func TestFromWorkload(t *testing.T) {
	obj := func(policy map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
			"metadata": map[string]any{"name": "job-1-abc", "namespace": "ns"}, "spec": map[string]any{"schedulingPolicy": policy}}}
	}
	for _, tc := range []struct {
		policy map[string]any
		want   WorkloadGroup
	}{
		{map[string]any{"gang": map[string]any{"minCount": int64(4)}}, WorkloadGroup{Group{Namespace: "ns", Name: "job-1-abc", MinMember: 4}, true}},
		{map[string]any{"basic": map[string]any{}}, WorkloadGroup{Group{Namespace: "ns", Name: "job-1-abc", MinMember: 1}, false}},
	} {
		g, err := FromWorkload(obj(tc.policy))
		if err != nil || g != tc.want {
			t.Errorf("FromWorkload(%v) = %+v, %v; want %+v", tc.policy, g, err, tc.want)
		}
	}
	for _, tc := range []struct {
		policy map[string]any
		want   string
	}{
		{map[string]any{"gang": map[string]any{"minCount": int64(0)}}, "podgroup ns/job-1-abc (scheduling.k8s.io): spec.schedulingPolicy.gang.minCount: must be a whole number in [1, 10000], got 0"},
		{map[string]any{"gang": map[string]any{"minCount": "four"}}, "podgroup ns/job-1-abc (scheduling.k8s.io): "},
	} {
		if _, err := FromWorkload(obj(tc.policy)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromWorkload(%v) = %v, want %q", tc.policy, err, tc.want)
		}
	}
}
