package scheduler

import (
	"fmt"

	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestGangAllOrNothing: a gang that cannot fit as a whole binds no member,
// one that fits binds all, and a member with a bad minimum is reported.
func TestGangAllOrNothing(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	gangPod := func(name, group, min string) {
		createPodWith(ctx, t, client, name, "1", map[string]string{membership.LabelPodGroup: group}, map[string]string{membership.AnnotationMinMember: min})
	}
	for i := 0; i < 3; i++ {
		gangPod(fmt.Sprintf("big-%d", i), "big", "3") // needs 3 GPUs, the node has 2
	}
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "big gang reported", func() error {
		return hasCondition(ctx, client, "big-0", corev1.PodReasonUnschedulable, "gang default/big: only 2 of the 3 members still needed fit, so none is placed")
	})
	gangPod("pair-0", "pair", "2")
	gangPod("pair-1", "pair", "2")
	waitFor(t, "pair gang bound", func() error { return countBound(ctx, client, "pair-", 2) })
	gangPod("odd-0", "odd", "many")
	waitFor(t, "bad minimum reported", func() error {
		return hasCondition(ctx, client, "odd-0", reasonInvalid, `annotation tessera.io/pod-group-min-member: must be a whole number in [1, 10000], got "many"`)
	})
	gangPod("wait-0", "wait", "2")
	waitFor(t, "incomplete gang waits", func() error {
		return hasCondition(ctx, client, "wait-0", corev1.PodReasonUnschedulable, "gang default/wait: 1 of 2 members exist")
	})
	if err := countBound(ctx, client, "big-", 0); err != nil {
		t.Fatal(err)
	}
}

// TestJobsAreAutomaticGangs: the pods of a Job with parallelism > 1 form a
// gang of that size without any label.
func TestJobsAreAutomaticGangs(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	job := func(name string, parallelism int32) {
		t.Helper()
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}},
			}}},
		}
		created, err := client.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// No Job controller runs here: create its pods as it would.
		for i := int32(0); i < parallelism; i++ {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default",
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(created, batchv1.SchemeGroupVersion.WithKind("Job"))}},
				Spec: corev1.PodSpec{SchedulerName: DefaultName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "main", Image: "example.invalid/none",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}},
				}}},
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	job("wide", 3) // 3 GPUs at once on a 2-GPU node: never
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "wide job waits as a gang", func() error {
		return hasCondition(ctx, client, "wide-0", corev1.PodReasonUnschedulable, "gang default/job:wide: only 2 of the 3 members still needed fit")
	})
	job("pair", 2)
	waitFor(t, "pair job bound", func() error { return countBound(ctx, client, "pair-", 2) })
	if err := countBound(ctx, client, "wide-", 0); err != nil {
		t.Fatal(err)
	}
}

// TestPodGroupResource: a PodGroup gives its members' minimum (no
// annotation needed) and a timeout after which waiting members say so.
func TestPodGroupResource(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := podgroups.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]map[string]any{
		"trio": {"minMember": int64(3), "scheduleTimeoutSeconds": int64(1)},
		"duo":  {"minMember": int64(2)},
	} {
		createCustom(ctx, t, dyn, podgroups.Resource(), "PodGroup", "default", name, spec)
	}
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	for i := 0; i < 3; i++ {
		createPodWith(ctx, t, client, fmt.Sprintf("trio-%d", i), "1", map[string]string{membership.LabelPodGroup: "trio"}, nil)
	}
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "trio times out", func() error {
		return hasCondition(ctx, client, "trio-0", corev1.PodReasonUnschedulable, "gang default/trio timed out")
	})
	createPodWith(ctx, t, client, "duo-0", "1", map[string]string{membership.LabelPodGroup: "duo"}, nil)
	createPodWith(ctx, t, client, "duo-1", "1", map[string]string{membership.LabelPodGroup: "duo"}, nil)
	waitFor(t, "duo bound", func() error { return countBound(ctx, client, "duo-", 2) })
	if err := countBound(ctx, client, "trio-", 0); err != nil {
		t.Fatal(err)
	}
}
