package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
)

// maxReviewBytes bounds a request body; the API server's objects are at
// most about 1.5 MiB (etcd's limit), and a review carries one.
const maxReviewBytes = 4 << 20

// Review answers one admission request: allowed with a JSON Patch for a pod,
// a batch/v1 Job's template or a JobSet's templates that need
// tessera.io/gpu or tessera.io/gpu-milli, allowed untouched for anything
// else, denied with kube/workload's message for an invalid GPU request.
// Only creations are reviewed: Kueue counts a Job's or a JobSet's templates
// when it is created. A suspended Job's template annotations may still
// change; a pod whose gpu-milli then disagrees with its share is refused by
// the scheduler.
func (h *Handler) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.SubResource != "" || req.Operation != admissionv1.Create {
		return resp
	}
	var (
		kind, name string
		ops        []Operation
		err        error
	)
	switch {
	case req.Kind.Group == "" && req.Kind.Kind == "Pod":
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return deny(resp, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode pod: %v", err))
		}
		kind, name = "pod", objectName(pod.ObjectMeta)
		ops, err = h.Mutate(&pod)
	case req.Kind.Group == "batch" && req.Kind.Version == "v1" && req.Kind.Kind == "Job":
		var job batchv1.Job
		if err := json.Unmarshal(req.Object.Raw, &job); err != nil {
			return deny(resp, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode job: %v", err))
		}
		kind, name = "job", objectName(job.ObjectMeta)
		ops, err = h.MutateJob(&job)
	case req.Kind.Group == "jobset.x-k8s.io" && req.Kind.Kind == "JobSet":
		var js JobSet
		if err := json.Unmarshal(req.Object.Raw, &js); err != nil {
			return deny(resp, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode jobset: %v", err))
		}
		kind, name = "jobset", objectName(js.ObjectMeta)
		ops, err = h.MutateJobSet(&js)
	default:
		return resp
	}
	if err != nil {
		h.cfg.Log.Info("denied "+kind, "namespace", req.Namespace, kind, name, "reason", err.Error())
		return deny(resp, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
	}
	if len(ops) == 0 {
		return resp
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return deny(resp, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode patch: %v", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	msg := "patched the pod's GPU request with Tessera's keys and " + workload.ResourceGPUMilli
	switch kind {
	case "job":
		msg = "patched the job's pod template with Tessera's keys and " + workload.ResourceGPUMilli
	case "jobset":
		msg = "patched the jobset's pod templates with Tessera's keys and " + workload.ResourceGPUMilli
	}
	h.cfg.Log.Info(msg, "namespace", req.Namespace, kind, name, "patch", string(patch))
	return resp
}

func objectName(m metav1.ObjectMeta) string {
	if m.Name == "" {
		return m.GenerateName + "*"
	}
	return m.Name
}

func deny(resp *admissionv1.AdmissionResponse, code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	resp.Allowed = false
	resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}
	return resp
}

// ServeHTTP serves AdmissionReview v1 requests (POST, JSON).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "admission reviews must be POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("read admission review: %v", err), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, fmt.Sprintf("decode admission review: %v", err), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "admission review has no request", http.StatusBadRequest)
		return
	}
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: h.Review(review.Request),
	}
	data, err := json.Marshal(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode admission review: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(data); err != nil {
		h.cfg.Log.Debug("write admission response", "error", err)
	}
}
