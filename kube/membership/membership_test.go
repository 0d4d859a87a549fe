package membership

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/queueing"
)

func pod(name string, labels, ann map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, Annotations: ann}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

// TestGangs: a labelled gang's key and minimum come from the pod; members
// that disagree on the minimum make the gang's spec an error; a Job of
// parallelism above one is an automatic gang (KAI's batch-min-member on
// the Job its minimum), one of parallelism one or a Job not listed is
// none; the zero Reader reads the pod alone.
func TestGangs(t *testing.T) {
	yes := true
	par := int32(4)
	jobs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u-j", Annotations: map[string]string{workload.KAIAnnotationMinMember: "3"}},
		Spec: batchv1.JobSpec{Parallelism: &par}}
	one := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "ns", UID: "u-one"}}
	for _, j := range []*batchv1.Job{job, one} {
		if err := jobs.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	r := Reader{Jobs: batchlisters.NewJobLister(jobs)}

	a := pod("a", map[string]string{LabelPodGroup: "g"}, map[string]string{AnnotationMinMember: "2"}, nil)
	b := pod("b", map[string]string{LabelPodGroup: "g"}, map[string]string{AnnotationMinMember: "3"}, nil)
	if k := r.Gang(a); k != "ns/g" {
		t.Errorf("labelled gang key %q, want ns/g", k)
	}
	if n, err := (Reader{}).MinMember(a); err != nil || n != 2 {
		t.Errorf("labelled minimum %d, %v; want 2", n, err)
	}
	if g := r.GangSpecs([]*corev1.Pod{a, b})["ns/g"]; g.Err == nil || !strings.Contains(g.Err.Error(), "members disagree") {
		t.Errorf("disagreeing members: %+v, want an error", g)
	}

	member := pod("m", nil, nil, &metav1.OwnerReference{Kind: "Job", Name: "j", UID: "u-j", Controller: &yes})
	if k := r.Gang(member); k != "ns/job:j" {
		t.Errorf("Job member's gang %q, want ns/job:j", k)
	}
	if n, err := r.MinMember(member); err != nil || n != 3 {
		t.Errorf("Job member's minimum %d, %v; want 3 (KAI's batch-min-member)", n, err)
	}
	if !GangFromJob(member) || GangFromJob(a) {
		t.Error("GangFromJob: want true for the Job's member only")
	}
	solo := pod("s", nil, nil, &metav1.OwnerReference{Kind: "Job", Name: "one", UID: "u-one", Controller: &yes})
	if k := r.Gang(solo); k != "" {
		t.Errorf("a Job of parallelism 1 made gang %q", k)
	}
	if k := (Reader{}).Gang(member); k != "" {
		t.Errorf("a Reader without Jobs made gang %q", k)
	}
}

// TestQueues: the queue label comes first, then KAI's, then the Volcano
// PodGroup's queue, else the default queue; QueueSource says where from.
func TestQueues(t *testing.T) {
	r := Reader{VolcanoGroup: func(ns, name string) (podgroups.VolcanoGroup, bool, error) {
		return podgroups.VolcanoGroup{Queue: "vq"}, name == "vg", nil
	}}
	for _, tc := range []struct {
		p          *corev1.Pod
		want, from string
	}{
		{pod("a", map[string]string{queues.LabelQueue: "q", workload.KAILabelQueue: "k"}, nil, nil), "q", "label " + queues.LabelQueue},
		{pod("b", map[string]string{workload.KAILabelQueue: "k"}, nil, nil), "k", "label " + workload.KAILabelQueue},
		{pod("c", nil, map[string]string{workload.VolcanoAnnotationGroupName: "vg"}, nil), "vq", "spec.queue of Volcano PodGroup ns/vg"},
		{pod("d", nil, map[string]string{workload.VolcanoAnnotationGroupName: "missing"}, nil), queueing.DefaultQueue, ""},
		{pod("e", nil, nil, nil), queueing.DefaultQueue, ""},
	} {
		if q, from := r.QueueSource(tc.p); q != tc.want || from != tc.from {
			t.Errorf("pod %s: queue %q from %q, want %q from %q", tc.p.Name, q, from, tc.want, tc.from)
		}
	}
	if !QueueFromGroup(pod("c", nil, map[string]string{workload.VolcanoAnnotationGroupName: "vg"}, nil)) {
		t.Error("QueueFromGroup: a pod with only a Volcano group reads its queue from it")
	}
}
