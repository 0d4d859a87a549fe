package admission

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	return h.mutateTemplate(job.Namespace, job.Name, job.UID, &tmpl.ObjectMeta, &tmpl.Spec, "/spec/template")
}

// mutateTemplate is MutateJob for the pod template (meta nil: a template
// without metadata) of the Job name in namespace, at root in the reviewed
// object.
func (h *Handler) mutateTemplate(namespace, name string, uid types.UID, meta *metav1.ObjectMeta, spec *corev1.PodSpec, root string) ([]Operation, error) {
	if spec.SchedulerName != h.cfg.SchedulerName {
		return nil, nil
	}
	// The pod the Job controller will create: the template, controlled by
	// the Job (KAI's batch-min-member is allowed on a Job's pods only).
	yes := true
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	if meta != nil {
		pod.ObjectMeta = *meta.DeepCopy()
	}
	pod.Namespace = namespace
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: "batch/v1", Kind: "Job", Name: name, UID: uid, Controller: &yes})
	return h.mutatePod(pod, podAt{root: root, hasMetadata: meta != nil, hasAnnotations: meta != nil && len(meta.Annotations) > 0})
}

// JobSet is the part of a JobSet (jobset.x-k8s.io, the kind Kueue's JobSet
// integration admits and JobSet's controller turns into one batch/v1 Job
// per replica of each replicated Job) that the webhook reads: each
// replicated Job's pod template. Declared here, not imported: the webhook
// reads four fields, and JobSet's module would pin its own Kubernetes.
type JobSet struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ReplicatedJobs []ReplicatedJob `json:"replicatedJobs"`
	} `json:"spec"`
}

// ReplicatedJob is one of a JobSet's replicated Jobs: its name and the
// pod template of its Jobs (template.spec.template).
type ReplicatedJob struct {
	Name     string `json:"name"`
	Template struct {
		Spec struct {
			Template struct {
				// Metadata is nil when the template has none: the API
				// server does not default a custom resource's metadata.
				Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
				Spec     corev1.PodSpec     `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	} `json:"template"`
}

// MutateJobSet returns the JSON Patch for a JobSet's pod templates: each
// replicated Job's template gets MutateJob's patch, so that Kueue, which
// counts a JobSet's templates when it is created, counts a 0.25 share as
// 250. The Jobs JobSet's controller creates carry the patched templates,
// so the webhook leaves them alone. An invalid template's error names it.
func (h *Handler) MutateJobSet(js *JobSet) ([]Operation, error) {
	var ops []Operation
	for i, rj := range js.Spec.ReplicatedJobs {
		tmpl := &rj.Template.Spec.Template
		// JobSet's controller names each Job <jobset>-<replicated job>-<index>.
		o, err := h.mutateTemplate(js.Namespace, js.Name+"-"+rj.Name, "", tmpl.Metadata, &tmpl.Spec,
			fmt.Sprintf("/spec/replicatedJobs/%d/template/spec/template", i))
		if err != nil {
			return nil, fmt.Errorf("spec.replicatedJobs[%d] (%s): %w", i, rj.Name, err)
		}
		ops = append(ops, o...)
	}
	return ops, nil
}
