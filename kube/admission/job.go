package admission

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MutateJob returns the JSON Patch for a batch/v1 Job's pod template: the
// patch Mutate gives a pod (translation and tessera.io/gpu-milli), so that
// a quota system counting the template (Kueue creates its Workload before
// any pod exists) counts a 0.25 share as 250. A template that already
// carries a correct gpu-milli keeps it; a wrong one, or an invalid
// request, returns kube/workload's error, as for a pod. The Job's pods
// inherit the patched template, so the webhook leaves them alone.
func (h *Handler) MutateJob(job *batchv1.Job) ([]Operation, error) {
	tmpl := &job.Spec.Template
	if tmpl.Spec.SchedulerName != h.cfg.SchedulerName {
		return nil, nil
	}
	// The pod the Job controller will create: the template, controlled by
	// the Job (KAI's batch-min-member is allowed on a Job's pods only).
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Namespace = job.Namespace
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes})
	return h.mutatePod(pod, "/spec/template", len(tmpl.Annotations) > 0)
}
