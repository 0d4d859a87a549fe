package admission

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
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

// mutatePod is Mutate and MutateJob: the translation of pod and, in each
// container with a compute share fixed before placement and no
// tessera.io/gpu-milli yet, tessera.io/gpu-milli (limit and request) equal
// to that share in thousandths over all its GPUs, as a JSON Patch of the
// pod at root ("" for a pod, "/spec/template" for a Job's template;
// hasAnnotations tells whether it has an annotations object), or nil when
// nothing changes.
func (h *Handler) mutatePod(pod *corev1.Pod, root string, hasAnnotations bool) ([]Operation, error) {
	t, patched, err := h.translate(pod)
	if err != nil {
		return nil, err
	}
	if t == nil {
		t = &translation{addAnn: map[string]string{}, resources: map[int]corev1.ResourceRequirements{}}
	}
	reqs, err := workload.FromPod(patched, h.cfg.Catalog) // translate checked it reads alike
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		idx := containerIndex(patched, r.Container)
		if idx < 0 || r.Convention != workload.Tessera || r.GPU.ComputeMilli == 0 || hasGPUMilli(patched.Spec.Containers[idx]) {
			continue // an existing value was checked by kube/workload
		}
		c := patched.Spec.Containers[idx]
		res := *c.Resources.DeepCopy()
		q := *resource.NewQuantity(int64(r.GPU.Count)*r.GPU.ComputeMilli, resource.DecimalSI)
		res.Limits[workload.ResourceGPUMilli] = q // tessera.io/gpu is there: limits exist
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[workload.ResourceGPUMilli] = q
		t.resources[idx] = res
	}
	if len(t.resources) == 0 && len(t.replaced) == 0 {
		return nil, nil
	}
	return t.operations(root, hasAnnotations), nil
}

func hasGPUMilli(c corev1.Container) bool {
	_, inLimits := c.Resources.Limits[workload.ResourceGPUMilli]
	_, inRequests := c.Resources.Requests[workload.ResourceGPUMilli]
	return inLimits || inRequests
}
