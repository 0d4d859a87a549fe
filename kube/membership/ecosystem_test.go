package membership

import (
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestSchedulerPluginsGangs: the scheduling.x-k8s.io/pod-group label makes
// a gang of its PodGroup's minMember and schedule timeout; a missing group
// is an error naming the label.
func TestSchedulerPluginsGangs(t *testing.T) {
	r := Reader{SchedulerPluginsGroup: func(ns, name string) (podgroups.Group, bool, error) {
		if name == "pg" {
			return podgroups.Group{Namespace: ns, Name: name, MinMember: 3, Timeout: time.Minute}, true, nil
		}
		return podgroups.Group{}, false, nil
	}}
	a := pod("a", map[string]string{workload.SchedulerPluginsLabelPodGroup: "pg"}, nil, nil)
	if k := r.Gang(a); k != "ns/x-k8s:pg" {
		t.Errorf("gang key %q, want ns/x-k8s:pg", k)
	}
	spec := r.GangSpecs([]*corev1.Pod{a})["ns/x-k8s:pg"]
	if spec.Err != nil || spec.Min != 3 || spec.Timeout != time.Minute {
		t.Errorf("gang spec %+v, want minimum 3 and timeout 1m", spec)
	}
	lost := pod("l", map[string]string{workload.SchedulerPluginsLabelPodGroup: "lost"}, nil, nil)
	if err := r.GangSpecs([]*corev1.Pod{lost})["ns/x-k8s:lost"].Err; err == nil ||
		!strings.Contains(err.Error(), "label scheduling.x-k8s.io/pod-group: PodGroup ns/lost (scheduling.x-k8s.io) not found") {
		t.Errorf("missing group: %v", err)
	}
	if GangFromJob(a) || GangFromGroup(a) {
		t.Error("a labelled pod's gang is read from the pod")
	}
}

// TestWorkloadAPIGangs: a pod naming a Workload API PodGroup with the gang
// policy is a member of that gang with its minCount, also when a Job runs
// it; a basic group leaves the pod to the other rules (here its Job's
// automatic gang); a missing or malformed group keeps the pod in the gang
// with an error saying why.
func TestWorkloadAPIGangs(t *testing.T) {
	yes := true
	par := int32(2)
	jobs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := jobs.Add(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u-j"}, Spec: batchv1.JobSpec{Parallelism: &par}}); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("spec.schedulingPolicy.gang.minCount: must be a whole number in [1, 10000], got 0")
	r := Reader{Jobs: batchlisters.NewJobLister(jobs), WorkloadGroup: func(ns, name string) (podgroups.WorkloadGroup, bool, error) {
		switch name {
		case "gang":
			return podgroups.WorkloadGroup{Group: podgroups.Group{Namespace: ns, Name: name, MinMember: 4}, Gang: true}, true, nil
		case "basic":
			return podgroups.WorkloadGroup{Group: podgroups.Group{Namespace: ns, Name: name, MinMember: 1}}, true, nil
		case "bad":
			return podgroups.WorkloadGroup{}, false, bad
		}
		return podgroups.WorkloadGroup{}, false, nil
	}}
	member := func(group string) *corev1.Pod {
		p := pod("m-"+group, nil, nil, &metav1.OwnerReference{Kind: "Job", Name: "j", UID: "u-j", Controller: &yes})
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		return p
	}
	for _, tc := range []struct {
		group, key string
		min        int
		err        string
	}{
		{"gang", "ns/podgroup:gang", 4, ""},
		{"basic", "ns/job:j", 2, ""},
		{"missing", "ns/podgroup:missing", 0, "spec.schedulingGroup.podGroupName: PodGroup ns/missing (scheduling.k8s.io) not found"},
		{"bad", "ns/podgroup:bad", 0, "spec.schedulingGroup.podGroupName: " + bad.Error()},
	} {
		p := member(tc.group)
		if k := r.Gang(p); k != tc.key {
			t.Errorf("%s: gang key %q, want %q", tc.group, k, tc.key)
		}
		spec := r.GangSpecs([]*corev1.Pod{p})[tc.key]
		if tc.err == "" && (spec.Err != nil || spec.Min != tc.min) {
			t.Errorf("%s: gang spec %+v, want minimum %d", tc.group, spec, tc.min)
		}
		if tc.err != "" && (spec.Err == nil || !strings.Contains(spec.Err.Error(), tc.err)) {
			t.Errorf("%s: gang spec error %v, want %q", tc.group, spec.Err, tc.err)
		}
		if !GangFromGroup(p) {
			t.Errorf("%s: GangFromGroup false for a pod whose gang its PodGroup decides", tc.group)
		}
	}
	labelled := member("gang")
	labelled.Labels = map[string]string{LabelPodGroup: "own"}
	labelled.Annotations = map[string]string{AnnotationMinMember: "1"}
	if k := r.Gang(labelled); k != "ns/own" || GangFromGroup(labelled) {
		t.Errorf("a pod's own label comes first: key %q", k)
	}
}
