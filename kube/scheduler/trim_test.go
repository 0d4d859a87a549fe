package scheduler

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestTrimKeepsWhatTheSchedulerReads: the informers' transform drops
// managedFields, kubectl's last-applied copy, node images and Job
// templates, and keeps everything else a pod and a node carry.
func TestTrimKeepsWhatTheSchedulerReads(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	prio := int32(7)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", ManagedFields: managed,
			Labels:          map[string]string{membership.LabelPodGroup: "g"},
			Annotations:     map[string]string{lastApplied: "{...}", membership.AnnotationMinMember: "2", workload.AnnotationCompute: "0.5"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "j", UID: "u-j"}}},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Priority: &prio, NodeSelector: map[string]string{"a": "b"},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}},
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	delete(want.Annotations, lastApplied)
	got, err := trimObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed pod:\n%+v\nwant\n%+v", got, want)
	}

	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: managed, Labels: map[string]string{nodeinventory.LabelModel: "H100"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res, Images: []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	wantNode := node.DeepCopy()
	wantNode.ManagedFields, wantNode.Status.Images = nil, nil
	if got, _ := trimObject(node); !equality.Semantic.DeepEqual(got, wantNode) {
		t.Errorf("trimmed node:\n%+v\nwant\n%+v", got, wantNode)
	}

	par := int32(4)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "u-j", ManagedFields: managed, Annotations: map[string]string{workload.KAIAnnotationMinMember: "3"}},
		Spec:       batchv1.JobSpec{Parallelism: &par, Template: corev1.PodTemplateSpec{Spec: *pod.Spec.DeepCopy()}},
		Status:     batchv1.JobStatus{Active: 4},
	}
	got, _ = trimObject(job)
	j := got.(*batchv1.Job)
	if j.ManagedFields != nil || len(j.Spec.Template.Spec.Containers) != 0 || j.Status.Active != 0 {
		t.Errorf("trimmed Job keeps managedFields, its template or its status: %+v", j)
	}
	if j.Name != "j" || j.UID != "u-j" || membership.Parallelism(j) != 4 || j.Annotations[workload.KAIAnnotationMinMember] != "3" {
		t.Errorf("trimmed Job lost what kube/membership reads (name, UID, parallelism, annotations): %+v", j)
	}
	if n, err := membership.JobMinMember(j, pod); err != nil || n != 3 {
		t.Errorf("jobMinMember of the trimmed Job = %d, %v; want 3", n, err)
	}

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: managed}}
	if got, _ := trimObject(other); len(got.(*corev1.ConfigMap).ManagedFields) != 1 {
		t.Error("an object of another type was changed")
	}
}
