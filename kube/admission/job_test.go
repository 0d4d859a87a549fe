package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

var jobKind = metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

// testJob is a Job whose template is pod's metadata and spec.
func testJob(pod *corev1.Pod) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: pod.Annotations, Labels: pod.Labels},
			Spec:       pod.Spec,
		}},
	}
}

var jobSetKind = metav1.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}

// testJobSet is a JobSet of two replicated Jobs, "driver" (one CPU, on the
// same scheduler as pod) and "workers", whose template is pod's metadata
// and spec; a pod without annotations or labels makes a template without
// metadata, as a client may send it (the API server does not default a
// custom resource's).
func testJobSet(pod *corev1.Pod) map[string]any {
	driver := map[string]any{"metadata": map[string]any{"labels": map[string]string{"role": "driver"}},
		"spec": corev1.PodSpec{SchedulerName: pod.Spec.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{ctr("driver", limits("cpu", "1"))}}}
	workers := map[string]any{"spec": pod.Spec}
	if len(pod.Annotations) > 0 || len(pod.Labels) > 0 {
		workers["metadata"] = metav1.ObjectMeta{Annotations: pod.Annotations, Labels: pod.Labels}
	}
	rj := func(name string, tmpl map[string]any) map[string]any {
		return map[string]any{"name": name, "replicas": 1, "template": map[string]any{"spec": map[string]any{"template": tmpl}}}
	}
	return map[string]any{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "train", "namespace": "ns"},
		"spec":     map[string]any{"replicatedJobs": []any{rj("driver", driver), rj("workers", workers)}}}
}

// reviewJob posts job to h as the API server does and returns the response.
func reviewJob(t *testing.T, h http.Handler, op admissionv1.Operation, job *batchv1.Job) *admissionv1.AdmissionResponse {
	t.Helper()
	return reviewObject(t, h, op, jobKind, job.Namespace, job)
}

// reviewObject posts obj, of kind, to h as the API server does and returns
// the response.
func reviewObject(t *testing.T, h http.Handler, op admissionv1.Operation, kind metav1.GroupVersionKind, namespace string, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Kind: kind, Operation: op, Namespace: namespace,
			Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "uid-1" {
		t.Fatalf("HTTP %d %s: %v", rec.Code, rec.Body, err)
	}
	return out.Response
}

// templatePod is the pod job's controller would create from its template.
func templatePod(job *batchv1.Job) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: job.Spec.Template.ObjectMeta, Spec: job.Spec.Template.Spec}
}

// TestReviewWritesGPUMilli: a Job's template, and the same pod created on
// its own, get tessera.io/gpu-milli for each fixed share (with the
// translation of another system's keys), so that a quota counting the
// template (Kueue's Job integration) or the pod (Kueue's pod integration,
// a ResourceQuota) counts the share.
func TestReviewWritesGPUMilli(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod // the template, or the pod
		want    map[string]request.GPU
		milli   map[string]int64  // tessera.io/gpu-milli per container; absent: none
		ann     map[string]string // annotations expected after the patch (all of them)
		jobOnly bool              // a key allowed on a Job's pods only
	}{
		{
			name:  "a Tessera fraction",
			pod:   testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))),
			want:  map[string]request.GPU{"main": shareOf(1, 250, 250, 0)},
			milli: map[string]int64{"main": 250},
			ann:   map[string]string{workload.AnnotationCompute: "0.25"},
		},
		{
			name:  "whole Tessera GPUs beside a CPU sidecar",
			pod:   testPod(nil, ctr("main", limits(workload.ResourceGPU, "2")), ctr("sidecar", limits("cpu", "1"))),
			want:  map[string]request.GPU{"main": shareOf(2, 1000, 1000, 0)},
			milli: map[string]int64{"main": 2000},
		},
		{
			name: "two GPUs at half, per container, beside a CPU sidecar",
			pod: testPod(map[string]string{workload.AnnotationCompute + ".train": "0.5"},
				ctr("train", limits(workload.ResourceGPU, "2", "cpu", "4")), ctr("sidecar", limits("cpu", "1"))),
			want:  map[string]request.GPU{"train": shareOf(2, 500, 500, 0)},
			milli: map[string]int64{"train": 1000},
			ann:   map[string]string{workload.AnnotationCompute + ".train": "0.5"},
		},
		{
			name:  "whole GPUs from nvidia.com/gpu",
			pod:   testPod(nil, ctr("main", limits("nvidia.com/gpu", "2"))),
			want:  map[string]request.GPU{"main": shareOf(2, 1000, 1000, 0)},
			milli: map[string]int64{"main": 2000},
			ann:   map[string]string{AnnotationMigratedFrom: "main:nvidia.com/gpu=2"},
		},
		{
			name: "KAI's fraction with the Job's gang minimum on the template",
			pod: testPod(map[string]string{"gpu-fraction": "0.5", "gpu-fraction-container-name": "trainer", "kai.scheduler/batch-min-member": "2"},
				ctr("log-shipper", limits("cpu", "100m")), ctr("trainer", corev1.ResourceRequirements{})),
			want:  map[string]request.GPU{"trainer": shareOf(1, 500, 1000, 0)},
			milli: map[string]int64{"trainer": 500},
			ann: map[string]string{"kai.scheduler/batch-min-member": "2", workload.AnnotationCompute: "0.5", workload.AnnotationComputeLimit: "1",
				AnnotationMigratedFrom: "gpu-fraction-container-name=trainer,gpu-fraction=0.5"},
			jobOnly: true,
		},
		{
			name: "HAMi memory without cores: the share follows memory, so no gpu-milli",
			pod:  testPod(nil, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "8000"))),
			want: map[string]request.GPU{"main": {Count: 1, ComputeLimitMilli: 1000, MemoryMiB: 8000}},
			ann: map[string]string{workload.AnnotationMemory + ".main": "8000Mi", workload.AnnotationComputeLimit + ".main": "1",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=1,main:nvidia.com/gpumem=8000"},
		},
	}
	h := newHandler(t)
	cat := catalog.Default()
	for _, tc := range tests {
		// check compares the patched pod (or the pod a patched template
		// makes) with the case.
		check := func(t *testing.T, what string, pod *corev1.Pod) {
			t.Helper()
			if !reflect.DeepEqual(pod.Annotations, tc.ann) {
				t.Errorf("%s: annotations %v, want %v", what, pod.Annotations, tc.ann)
			}
			if gotReqs := tesseraRequests(t, what, pod, cat); !reflect.DeepEqual(gotReqs, tc.want) {
				t.Errorf("%s: requests %+v, want %+v", what, gotReqs, tc.want)
			}
			for _, c := range pod.Spec.Containers {
				lim, inLim := c.Resources.Limits[workload.ResourceGPUMilli]
				req, inReq := c.Resources.Requests[workload.ResourceGPUMilli]
				want, ok := tc.milli[c.Name]
				if inLim != ok || inReq != ok || (ok && (lim.Value() != want || req.Value() != want)) {
					t.Errorf("%s: container %s: %s limit %v (%v), request %v (%v); want %d (%v)", what, c.Name, workload.ResourceGPUMilli, lim.String(), inLim, req.String(), inReq, want, ok)
				}
			}
			// A patched pod needs no further change.
			if ops, err := h.Mutate(pod); err != nil || ops != nil {
				t.Errorf("%s is patched again: patch %v, error %v; want none", what, ops, err)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(tc.pod)
			resp := reviewJob(t, h, admissionv1.Create, job)
			if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response %+v: want allowed with a JSON patch", resp)
			}
			raw, _ := json.Marshal(job)
			out, err := applyPatch(raw, resp.Patch)
			if err != nil {
				t.Fatalf("apply %s: %v", resp.Patch, err)
			}
			var got batchv1.Job
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.ObjectMeta, job.ObjectMeta) || !reflect.DeepEqual(got.Spec.Template.Labels, job.Spec.Template.Labels) {
				t.Errorf("the patch changed more than the template's annotations and containers: %s", resp.Patch)
			}
			// The Job's pods inherit the template: the webhook leaves them be.
			pod := templatePod(&got)
			yes := true
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: "u1", Controller: &yes}}
			check(t, "the Job's pods", pod)

			// The same template as a JobSet's workers, beside a CPU-only
			// driver the patch leaves alone.
			js := testJobSet(tc.pod)
			raw, _ = json.Marshal(js)
			resp = reviewObject(t, h, admissionv1.Create, jobSetKind, "ns", js)
			if !resp.Allowed || resp.PatchType == nil {
				t.Fatalf("JobSet: response %+v: want allowed with a JSON patch", resp)
			}
			if out, err = applyPatch(raw, resp.Patch); err != nil {
				t.Fatalf("apply %s to the JobSet: %v", resp.Patch, err)
			}
			var gotSet JobSet
			if err := json.Unmarshal(out, &gotSet); err != nil {
				t.Fatal(err)
			}
			if len(gotSet.Spec.ReplicatedJobs) != 2 || !strings.Contains(string(resp.Patch), "/spec/replicatedJobs/1/template/spec/template/") ||
				strings.Contains(string(resp.Patch), "/spec/replicatedJobs/0/") {
				t.Fatalf("JobSet patch %s: want the workers' template patched and the driver's left alone", resp.Patch)
			}
			tmpl := gotSet.Spec.ReplicatedJobs[1].Template.Spec.Template
			pod = &corev1.Pod{Spec: tmpl.Spec}
			if tmpl.Metadata != nil {
				pod.ObjectMeta = *tmpl.Metadata
			}
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train-workers-0", UID: "u2", Controller: &yes}}
			check(t, "the JobSet's worker pods", pod)
			if tc.jobOnly {
				return
			}
			bare := tc.pod.DeepCopy()
			check(t, "the pod created on its own", patchPod(t, bare, review(t, h, admissionv1.Create, podKind, bare)))
		})
	}
}

func TestReviewLeavesOtherJobsAlone(t *testing.T) {
	other := testJob(testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))))
	other.Spec.Template.Spec.SchedulerName = "default-scheduler"
	tests := []struct {
		name string
		op   admissionv1.Operation
		job  *batchv1.Job
	}{
		{"asks for nothing", admissionv1.Create, testJob(testPod(nil, ctr("main", limits("cpu", "1"))))},
		{"carries the right gpu-milli", admissionv1.Create, testJob(testPod(map[string]string{workload.AnnotationCompute: "0.25"},
			ctr("main", limits(workload.ResourceGPU, "2", workload.ResourceGPUMilli, "500"))))},
		{"whole GPUs with the right gpu-milli", admissionv1.Create, testJob(testPod(nil,
			ctr("main", limits(workload.ResourceGPU, "1", workload.ResourceGPUMilli, "1000"))))},
		{"another scheduler's Job", admissionv1.Create, other},
		{"an update", admissionv1.Update, testJob(testPod(map[string]string{"gpu-fraction": "0.5"}))},
	}
	h := newHandler(t)
	for _, tc := range tests {
		resp := reviewJob(t, h, tc.op, tc.job)
		if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil || resp.Result != nil {
			t.Errorf("%s: response %+v, want allowed with no patch", tc.name, resp)
		}
		// The same template as a JobSet's workers.
		js := testJobSet(&corev1.Pod{ObjectMeta: tc.job.Spec.Template.ObjectMeta, Spec: tc.job.Spec.Template.Spec})
		resp = reviewObject(t, h, tc.op, jobSetKind, "ns", js)
		if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil || resp.Result != nil {
			t.Errorf("%s, as a JobSet: response %+v, want allowed with no patch", tc.name, resp)
		}
	}
}

func TestReviewDeniesBadJobTemplates(t *testing.T) {
	tests := []deniedCase{
		{"wrong gpu-milli", testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1", workload.ResourceGPUMilli, "1000"))),
			[]string{workload.ResourceGPUMilli, "container main", "250", "got 1k"}},
		{"gpu-milli beside nvidia.com/gpu", testPod(nil, ctr("main", limits("nvidia.com/gpu", "1", workload.ResourceGPUMilli, "1000"))),
			[]string{workload.ResourceGPUMilli, "container main"}},
		{"fraction above one", testPod(map[string]string{"gpu-fraction": "1.5"}),
			[]string{"annotation gpu-fraction of container main", "(0, 1]", `"1.5"`}},
		{"Tessera annotation without the resource", testPod(map[string]string{workload.AnnotationCompute: "0.5"}),
			[]string{"annotation tessera.io/gpu-fraction", "no container requests tessera.io/gpu"}},
	}
	h := newHandler(t)
	for _, tc := range tests {
		// A Job's template is refused with the message its pods would get.
		podResp := review(t, h, admissionv1.Create, podKind, tc.pod)
		resp := reviewJob(t, h, admissionv1.Create, testJob(tc.pod))
		if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s: response %+v, want denied with code 422", tc.name, resp)
			continue
		}
		if podResp.Result == nil || resp.Result.Message != podResp.Result.Message {
			t.Errorf("%s: Job denied with %q, its pod with %+v", tc.name, resp.Result.Message, podResp.Result)
		}
		// A JobSet's, with the message naming the replicated Job.
		setResp := reviewObject(t, h, admissionv1.Create, jobSetKind, "ns", testJobSet(tc.pod))
		if podResp.Result != nil {
			if want := "spec.replicatedJobs[1] (workers): " + podResp.Result.Message; setResp.Allowed || setResp.Result == nil ||
				setResp.Result.Code != http.StatusUnprocessableEntity || setResp.Result.Message != want {
				t.Errorf("%s: JobSet response %+v, want denied with code 422 and %q", tc.name, setResp, want)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(resp.Result.Message, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, resp.Result.Message, w)
			}
		}
	}
}
