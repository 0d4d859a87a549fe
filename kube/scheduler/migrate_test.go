package scheduler

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// gpuPod is a pod asking for one whole GPU as NVIDIA's device plugin
// documents it (nvidia.com/gpu), with Tessera's schedulerName.
func gpuPod(name string, labels, ann map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceNVIDIAGPU: resource.MustParse("1")}},
		}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func mustCreatePod(ctx context.Context, t *testing.T, c kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKAIQueueAndMinMember: KAI's batch-min-member on a Job sets the gang
// minimum (not the Job's parallelism), and the kai.scheduler/queue label
// puts pods in that queue.
func TestKAIQueueAndMinMember(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "research", map[string]any{"limit": map[string]any{"gpu": "1"}})
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "3"})
	// A Job of parallelism 6 that KAI's docs gang by 2: with 3 GPUs, 3 run.
	parallelism := int32(6)
	job, err := client.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hpo", Namespace: "default", Annotations: map[string]string{workload.KAIAnnotationMinMember: "2"}},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	// No Job controller runs here: create its pods as it would.
	for i := 0; i < 6; i++ {
		mustCreatePod(ctx, t, client, gpuPod(fmt.Sprintf("hpo-%d", i), nil, nil, owner))
	}
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "3 of the Job's pods bound", func() error { return countBound(ctx, client, "hpo-", 3) })
	// The node is full; a pod of KAI's research queue (limit 1 GPU) waits
	// for the queue's limit, not for the default queue.
	for i := 0; i < 2; i++ {
		mustCreatePod(ctx, t, client, gpuPod(fmt.Sprintf("kai-%d", i), map[string]string{workload.KAILabelQueue: "research"}, nil, nil))
	}
	mustCreatePod(ctx, t, client, gpuPod("ghost-0", map[string]string{workload.KAILabelQueue: "ghost"}, nil, nil))
	waitFor(t, "unknown KAI queue reported", func() error {
		return hasCondition(ctx, client, "ghost-0", reasonInvalid, `label kai.scheduler/queue: queue "ghost" does not exist`)
	})
	// Free the node: one research pod fits its queue's limit, the other
	// reports the limit.
	for i := 0; i < 6; i++ {
		_ = client.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("hpo-%d", i), metav1.DeleteOptions{})
	}
	waitFor(t, "research gets one GPU", func() error { return countBound(ctx, client, "kai-", 1) })
	waitFor(t, "research's second pod hits the limit", func() error {
		for _, n := range []string{"kai-0", "kai-1"} {
			if hasCondition(ctx, client, n, reasonQueueLimit, "queue research: would use") == nil {
				return nil
			}
		}
		return fmt.Errorf("no research pod reports the queue limit")
	})
	// A bad minimum on a Job is reported on its pods.
	bad, err := client.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default", Annotations: map[string]string{workload.KAIAnnotationMinMember: "two"}},
		// A template of its own: the API server labelled hpo's with hpo's UID.
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreatePod(ctx, t, client, gpuPod("bad-0", nil, nil, metav1.NewControllerRef(bad, batchv1.SchemeGroupVersion.WithKind("Job"))))
	waitFor(t, "bad minimum reported", func() error {
		return hasCondition(ctx, client, "bad-0", reasonInvalid, `annotation kai.scheduler/batch-min-member of Job bad: must be a whole number in [1, 10000], got "two"`)
	})
}

// volcanoPodGroupCRD is a minimal CRD for Volcano's PodGroup, enough to
// create PodGroup objects as Volcano's Job controller does.
const volcanoPodGroupCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podgroups.scheduling.volcano.sh
spec:
  group: scheduling.volcano.sh
  scope: Namespaced
  names: {plural: podgroups, singular: podgroup, kind: PodGroup, listKind: PodGroupList}
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

// createVolcanoGroup creates a PodGroup as Volcano's Job controller does for
// a Job (minMember from minAvailable, the Job's queue).
func createVolcanoGroup(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string, minMember int64, queue string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"minMember": minMember, "queue": queue, "minResources": map[string]any{"cpu": "1"}},
	}}
	if _, err := dyn.Resource(podgroups.VolcanoResource()).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestVolcanoPodGroups: pods that Volcano's Job controller would create
// (annotation scheduling.k8s.io/group-name, volcano.sh/vgpu-* resources)
// form the gang of their Volcano PodGroup, in its queue.
func TestVolcanoPodGroups(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := crd.Install(ctx, dyn, []byte(volcanoPodGroupCRD)); err != nil {
		t.Fatal(err)
	}
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "small", map[string]any{"limit": map[string]any{"gpu": "1"}})
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createVolcanoGroup(ctx, t, dyn, "trio", 3, "default")
	createVolcanoGroup(ctx, t, dyn, "duo", 2, "default")
	createVolcanoGroup(ctx, t, dyn, "capped", 2, "small")
	vgpuPod := func(name, group, cores string) *corev1.Pod {
		p := gpuPod(name, nil, map[string]string{workload.VolcanoAnnotationGroupName: group}, nil)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
			workload.VolcanoResourceNumber: resource.MustParse("1"), workload.VolcanoResourceMemory: resource.MustParse("1024"), workload.VolcanoResourceCores: resource.MustParse(cores),
		}
		return p
	}
	// trio needs 3 whole GPUs at once; the node has 2.
	for i := 0; i < 3; i++ {
		mustCreatePod(ctx, t, client, gpuPod(fmt.Sprintf("trio-%d", i), nil, map[string]string{workload.VolcanoAnnotationGroupName: "trio"}, nil))
	}
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "trio reported", func() error {
		return hasCondition(ctx, client, "trio-0", corev1.PodReasonUnschedulable, "gang default/volcano:trio: only 2 of the 3 members still needed fit, so none is placed")
	})
	if err := countBound(ctx, client, "trio-", 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"trio-0", "trio-1", "trio-2"} {
		_ = client.CoreV1().Pods("default").Delete(ctx, p, metav1.DeleteOptions{})
	}
	mustCreatePod(ctx, t, client, vgpuPod("duo-0", "duo", "50"))
	waitFor(t, "a lone member waits for the other", func() error {
		return hasCondition(ctx, client, "duo-0", corev1.PodReasonUnschedulable, "gang default/volcano:duo: 1 of 2 members exist")
	})
	mustCreatePod(ctx, t, client, vgpuPod("duo-1", "duo", "50"))
	waitFor(t, "duo bound", func() error { return countBound(ctx, client, "duo-", 2) })
	// capped asks 2 x 0.75 GPU in queue small (limit 1 GPU): the limit, not
	// the room (a second node leaves plenty wherever duo packed), holds it.
	createGPUNode(ctx, t, client, "gpu-1", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	mustCreatePod(ctx, t, client, vgpuPod("capped-0", "capped", "75"))
	mustCreatePod(ctx, t, client, vgpuPod("capped-1", "capped", "75"))
	waitFor(t, "the PodGroup's queue limit applies", func() error {
		return hasCondition(ctx, client, "capped-0", reasonQueueLimit, "queue small: would use")
	})
	mustCreatePod(ctx, t, client, vgpuPod("lost-0", "lost", "50"))
	waitFor(t, "missing PodGroup reported", func() error {
		return hasCondition(ctx, client, "lost-0", reasonInvalid, "annotation scheduling.k8s.io/group-name: Volcano PodGroup default/lost not found")
	})
}
