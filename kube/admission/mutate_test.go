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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/agent/handoff"
	agentkube "github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
)

func newHandler(t *testing.T) *Handler {
	t.Helper()
	h, err := New(Config{SchedulerName: "tessera", Catalog: catalog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func testPod(ann map[string]string, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "main", Image: "cuda"}}
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann},
		Spec:       corev1.PodSpec{SchedulerName: "tessera", Containers: containers},
	}
}

func limits(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Limits: l}
}

// review posts pod to the handler as the API server does and returns the
// response.
func review(t *testing.T, h http.Handler, op admissionv1.Operation, kind metav1.GroupVersionKind, pod *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	in := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Kind: kind, Operation: op, Namespace: pod.Namespace,
			Object: runtime.RawExtension{Raw: raw}},
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != "uid-1" {
		t.Fatalf("response review %+v lacks the type, the response or the request's UID", out)
	}
	return out.Response
}

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func TestReviewTranslatesKAIAnnotations(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		container string
		gpus      int64
		ann       map[string]string // annotations expected after the patch (all of them)
		keep      corev1.ResourceList
	}{
		{
			name:      "fraction on a container without resources",
			pod:       testPod(map[string]string{"gpu-fraction": "0.5", "team": "a"}),
			container: "main", gpus: 1,
			ann: map[string]string{"team": "a", workload.AnnotationCompute: "0.5", workload.AnnotationComputeLimit: "1", AnnotationMigratedFrom: "gpu-fraction=0.5"},
		},
		{
			name: "memory on two devices, first container keeps its other limits, sidecar untouched",
			pod: testPod(map[string]string{"gpu-memory": "2000", "gpu-fraction-num-devices": "2"},
				corev1.Container{Name: "train", Resources: limits("cpu", "2", "memory", "4Gi")},
				corev1.Container{Name: "sidecar"}),
			container: "train", gpus: 2,
			ann:  map[string]string{workload.AnnotationMemory: "2000Mi", workload.AnnotationComputeLimit: "1", AnnotationMigratedFrom: "gpu-fraction-num-devices=2,gpu-memory=2000"},
			keep: corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi")},
		},
		{
			name:      "percent fraction",
			pod:       testPod(map[string]string{"gpu-fraction": "25%"}),
			container: "main", gpus: 1,
			ann: map[string]string{workload.AnnotationCompute: "25%", workload.AnnotationComputeLimit: "1", AnnotationMigratedFrom: "gpu-fraction=25%"},
		},
	}
	h := newHandler(t)
	cat := catalog.Default()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := workload.FromPod(tc.pod, cat)
			if err != nil || len(before) != 1 {
				t.Fatalf("original request: %v %v", before, err)
			}
			resp := review(t, h, admissionv1.Create, podKind, tc.pod)
			got := patchPod(t, tc.pod, resp)
			if !reflect.DeepEqual(got.Annotations, tc.ann) {
				t.Errorf("annotations %v, want %v", got.Annotations, tc.ann)
			}
			for i, c := range got.Spec.Containers {
				lim, req := c.Resources.Limits[workload.ResourceGPU], c.Resources.Requests[workload.ResourceGPU]
				if c.Name != tc.container {
					if !reflect.DeepEqual(c, tc.pod.Spec.Containers[i]) {
						t.Errorf("container %s changed: %+v", c.Name, c)
					}
					continue
				}
				if lim.Value() != tc.gpus || req.Value() != tc.gpus {
					t.Errorf("container %s: %s limit %s, request %s; want %d", c.Name, workload.ResourceGPU, lim.String(), req.String(), tc.gpus)
				}
				for k, v := range tc.keep {
					if q := c.Resources.Limits[k]; q.Cmp(v) != 0 {
						t.Errorf("container %s: limit %s = %s, want %s kept", c.Name, k, q.String(), v.String())
					}
				}
			}
			// The scheduler reads the same request from the patched pod...
			after, err := workload.FromPod(got, cat)
			if err != nil || len(after) != 1 || after[0].Convention != workload.Tessera || after[0].Container != tc.container || !reflect.DeepEqual(after[0].GPU, before[0].GPU) {
				t.Errorf("scheduler reads %+v, %v; want the original request %+v under Tessera's keys", after, err, before[0])
			}
			// ...and the agent expects one device per GPU of that request.
			if cs := agentkube.FromAPI(got).Containers; !reflect.DeepEqual(cs, []handoff.ContainerRequest{{Name: tc.container, Devices: before[0].GPU.Count}}) {
				t.Errorf("agent sees device requests %+v, want %d for %s", cs, before[0].GPU.Count, tc.container)
			}
		})
	}
}

func TestReviewLeavesOtherPodsAlone(t *testing.T) {
	other := testPod(map[string]string{"gpu-fraction": "0.5"})
	other.Spec.SchedulerName = "default-scheduler"
	otherNVIDIA := testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1")})
	otherNVIDIA.Spec.SchedulerName = "default-scheduler"
	otherHAMi := testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30")})
	otherHAMi.Spec.SchedulerName = "hami-scheduler"
	tests := []struct {
		name string
		op   admissionv1.Operation
		kind metav1.GroupVersionKind
		pod  *corev1.Pod
	}{
		{"asks for nothing", admissionv1.Create, podKind, testPod(nil)},
		{"tessera.io/gpu with its gpu-milli", admissionv1.Create, podKind, testPod(map[string]string{workload.AnnotationCompute: "0.5"},
			corev1.Container{Name: "main", Resources: limits(workload.ResourceGPU, "1", workload.ResourceGPUMilli, "500")})},
		{"a share that follows memory (known only on the chosen GPU)", admissionv1.Create, podKind, testPod(map[string]string{workload.AnnotationMemory: "8Gi"},
			corev1.Container{Name: "main", Resources: limits(workload.ResourceGPU, "1")})},
		{"another scheduler's pod", admissionv1.Create, podKind, other},
		{"another scheduler's nvidia.com/gpu pod", admissionv1.Create, podKind, otherNVIDIA},
		{"another scheduler's HAMi pod", admissionv1.Create, podKind, otherHAMi},
		{"an update", admissionv1.Update, podKind, testPod(map[string]string{"gpu-fraction": "0.5"})},
		{"not a pod", admissionv1.Create, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, testPod(map[string]string{"gpu-fraction": "0.5"})},
	}
	h := newHandler(t)
	for _, tc := range tests {
		resp := review(t, h, tc.op, tc.kind, tc.pod)
		if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil || resp.Result != nil {
			t.Errorf("%s: response %+v, want allowed with no patch", tc.name, resp)
		}
	}
}

func TestReviewDeniesBadRequests(t *testing.T) {
	tests := []deniedCase{
		{"fraction above one", testPod(map[string]string{"gpu-fraction": "1.5"}),
			[]string{"annotation gpu-fraction of container main", "(0, 1]", `"1.5"`}},
		{"fraction and memory", testPod(map[string]string{"gpu-fraction": "0.5", "gpu-memory": "2000"}),
			[]string{"annotation gpu-memory", "conflicts with gpu-fraction"}},
		{"memory with a unit", testPod(map[string]string{"gpu-memory": "2Gi"}),
			[]string{"annotation gpu-memory", "whole number of MiB >= 1", `"2Gi"`}},
		{"too many devices", testPod(map[string]string{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "17"}),
			[]string{"annotation gpu-fraction-num-devices of container main", "[1, 16]", `"17"`}},
		{"KAI annotations with a GPU resource", testPod(map[string]string{"gpu-fraction": "0.5"}, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1")}),
			[]string{"annotation gpu-fraction of container main", "conflicts with resource nvidia.com/gpu"}},
		{"KAI and Tessera annotations", testPod(map[string]string{"gpu-fraction": "0.5", workload.AnnotationModel + ".main": "H100"}),
			[]string{"annotation tessera.io/gpu-model.main", "conflicts with KAI's"}},
		{"Tessera annotation without the resource", testPod(map[string]string{workload.AnnotationCompute: "0.5"}),
			[]string{"annotation tessera.io/gpu-fraction", "no container requests tessera.io/gpu"}},
	}
	expectDenied(t, tests)
}

func TestServeHTTPRejectsMalformedReviews(t *testing.T) {
	h := newHandler(t)
	tests := []struct {
		method, body string
		code         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "{", http.StatusBadRequest},
		{http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/mutate", strings.NewReader(tc.body)))
		if rec.Code != tc.code {
			t.Errorf("%s %q: HTTP %d, want %d", tc.method, tc.body, rec.Code, tc.code)
		}
	}
	// A review whose object is not a pod is denied, not crashed on.
	raw := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","object":{"spec":{"containers":"nope"}}}}`)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(raw)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Allowed || !strings.Contains(out.Response.Result.Message, "decode pod") {
		t.Errorf("undecodable pod: %s %v, want denied with \"decode pod\"", rec.Body, err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := New(Config{Catalog: catalog.Default()}); err == nil || !strings.Contains(err.Error(), "scheduler name") {
		t.Errorf("no scheduler name: %v", err)
	}
	if _, err := New(Config{SchedulerName: "tessera"}); err == nil || !strings.Contains(err.Error(), "catalog") {
		t.Errorf("no catalog: %v", err)
	}
}

// withRequests returns r with requests set from kv (name, quantity pairs).
func withRequests(r corev1.ResourceRequirements, kv ...string) corev1.ResourceRequirements {
	r.Requests = limits(kv...).Limits
	return r
}

// patchPod applies resp's JSON Patch to pod, as the API server does.
func patchPod(t *testing.T, pod *corev1.Pod, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || len(resp.Patch) == 0 {
		t.Fatalf("response %+v: want allowed with a JSON patch", resp)
	}
	return patched(t, pod, resp.Patch)
}

// patched is pod with the JSON Patch applied, as the API server would.
func patched(t *testing.T, pod *corev1.Pod, patch []byte) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := applyPatch(raw, patch)
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func TestReviewTranslatesNVIDIAAndHAMiResources(t *testing.T) {
	long := strings.Repeat("c", 63) // the longest container name
	tests := []struct {
		name string
		pod  *corev1.Pod
		gpus map[string]int64  // tessera.io/gpu per translated container; others stay as they were
		ann  map[string]string // annotations expected after the patch (all of them)
		keep map[string]corev1.ResourceList
	}{
		{
			name: "nvidia.com/gpu on a pod without annotations",
			pod:  testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "2")}),
			gpus: map[string]int64{"main": 2},
			ann:  map[string]string{AnnotationMigratedFrom: "main:nvidia.com/gpu=2"},
		},
		{
			name: "nvidia.com/gpu in limits and requests, other resources kept",
			pod: testPod(map[string]string{"team": "a", workload.AnnotationPolicy: "binpack"},
				corev1.Container{Name: "main", Resources: withRequests(limits("nvidia.com/gpu", "1", "cpu", "2"), "nvidia.com/gpu", "1", "cpu", "1")}),
			gpus: map[string]int64{"main": 1},
			ann:  map[string]string{"team": "a", workload.AnnotationPolicy: "binpack", AnnotationMigratedFrom: "main:nvidia.com/gpu=1"},
			keep: map[string]corev1.ResourceList{"main": {"cpu": resource.MustParse("2")}},
		},
		{
			name: "HAMi gpumem and gpucores",
			pod: testPod(map[string]string{"team": "a"},
				corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30")}),
			gpus: map[string]int64{"main": 1},
			ann: map[string]string{"team": "a",
				workload.AnnotationCompute + ".main": "30%", workload.AnnotationMemory + ".main": "3000Mi",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=1,main:nvidia.com/gpucores=30,main:nvidia.com/gpumem=3000"},
		},
		{
			name: "HAMi gpumem alone: the limit is the whole GPU",
			pod:  testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "2", "nvidia.com/gpumem", "8000")}),
			gpus: map[string]int64{"main": 2},
			ann: map[string]string{workload.AnnotationMemory + ".main": "8000Mi", workload.AnnotationComputeLimit + ".main": "1",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=2,main:nvidia.com/gpumem=8000"},
		},
		{
			name: "HAMi gpumem-percentage",
			pod:  testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "50")}),
			gpus: map[string]int64{"main": 1},
			ann: map[string]string{workload.AnnotationCompute + ".main": "50%", workload.AnnotationComputeLimit + ".main": "1",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=1,main:nvidia.com/gpumem-percentage=50"},
		},
		{
			name: "gpumem-percentage equal to gpucores",
			pod:  testPod(nil, corev1.Container{Name: "main", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "25", "nvidia.com/gpucores", "25")}),
			gpus: map[string]int64{"main": 1},
			ann: map[string]string{workload.AnnotationCompute + ".main": "25%", workload.AnnotationMemory + ".main": "25%",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=1,main:nvidia.com/gpucores=25,main:nvidia.com/gpumem-percentage=25"},
		},
		{
			name: "several containers: HAMi, nvidia.com/gpu, tessera.io/gpu and none",
			pod: testPod(nil,
				corev1.Container{Name: "train", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "50", "memory", "4Gi")},
				corev1.Container{Name: "infer", Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "4000")},
				corev1.Container{Name: "whole", Resources: limits("nvidia.com/gpu", "2")},
				corev1.Container{Name: "native", Resources: limits(workload.ResourceGPU, "1")},
				corev1.Container{Name: "sidecar", Resources: limits("cpu", "1")}),
			gpus: map[string]int64{"train": 1, "infer": 1, "whole": 2},
			ann: map[string]string{
				workload.AnnotationCompute + ".train": "50%",
				workload.AnnotationMemory + ".infer":  "4000Mi", workload.AnnotationComputeLimit + ".infer": "1",
				AnnotationMigratedFrom: "infer:nvidia.com/gpu=1,infer:nvidia.com/gpumem=4000,train:nvidia.com/gpu=1,train:nvidia.com/gpucores=50,whole:nvidia.com/gpu=2"},
			keep: map[string]corev1.ResourceList{"train": {"memory": resource.MustParse("4Gi")}},
		},
		{
			name: "the only GPU container's name is too long for KEY.<container>: plain keys",
			pod: testPod(nil, corev1.Container{Name: long, Resources: limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "40")},
				corev1.Container{Name: "sidecar"}),
			gpus: map[string]int64{long: 1},
			ann: map[string]string{workload.AnnotationCompute: "40%",
				AnnotationMigratedFrom: long + ":nvidia.com/gpu=1," + long + ":nvidia.com/gpucores=40"},
		},
	}
	h := newHandler(t)
	cat := catalog.Default()
	foreign := []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := workload.FromPod(tc.pod, cat)
			if err != nil || len(before) == 0 {
				t.Fatalf("original request: %v %v", before, err)
			}
			got := patchPod(t, tc.pod, review(t, h, admissionv1.Create, podKind, tc.pod))
			if !reflect.DeepEqual(got.Annotations, tc.ann) {
				t.Errorf("annotations %v, want %v", got.Annotations, tc.ann)
			}
			var wantDevices []handoff.ContainerRequest
			for i, c := range got.Spec.Containers {
				orig := tc.pod.Spec.Containers[i]
				n, translated := tc.gpus[c.Name]
				if !translated {
					// Unchanged but for the gpu-milli of a fixed share
					// (checked below with the translated ones').
					c := *c.DeepCopy()
					if _, ok := orig.Resources.Limits[workload.ResourceGPUMilli]; !ok {
						delete(c.Resources.Limits, workload.ResourceGPUMilli)
					}
					if _, ok := orig.Resources.Requests[workload.ResourceGPUMilli]; !ok {
						delete(c.Resources.Requests, workload.ResourceGPUMilli)
						if len(c.Resources.Requests) == 0 && orig.Resources.Requests == nil {
							c.Resources.Requests = nil
						}
					}
					if !reflect.DeepEqual(c, orig) {
						t.Errorf("container %s changed: %+v", c.Name, c)
					}
					if q, ok := c.Resources.Limits[workload.ResourceGPU]; ok {
						wantDevices = append(wantDevices, handoff.ContainerRequest{Name: c.Name, Devices: int(q.Value())})
					}
					continue
				}
				wantDevices = append(wantDevices, handoff.ContainerRequest{Name: c.Name, Devices: int(n)})
				lim, req := c.Resources.Limits[workload.ResourceGPU], c.Resources.Requests[workload.ResourceGPU]
				if lim.Value() != n || req.Value() != n {
					t.Errorf("container %s: %s limit %s, request %s; want %d", c.Name, workload.ResourceGPU, lim.String(), req.String(), n)
				}
				for _, k := range foreign {
					if _, ok := c.Resources.Limits[k]; ok {
						t.Errorf("container %s keeps limit %s", c.Name, k)
					}
					if _, ok := c.Resources.Requests[k]; ok {
						t.Errorf("container %s keeps request %s", c.Name, k)
					}
				}
				for k, v := range tc.keep[c.Name] {
					if q := c.Resources.Limits[k]; q.Cmp(v) != 0 {
						t.Errorf("container %s: limit %s = %s, want %s kept", c.Name, k, q.String(), v.String())
					}
				}
				for k, v := range orig.Resources.Requests {
					if q, ok := c.Resources.Requests[k]; !slicesContains(foreign, k) && (!ok || q.Cmp(v) != 0) {
						t.Errorf("container %s: request %s = %s, want %s kept", c.Name, k, q.String(), v.String())
					}
				}
			}
			// The scheduler reads the same requests from the patched pod...
			after, err := workload.FromPod(got, cat)
			if err != nil || len(after) != len(before) {
				t.Fatalf("scheduler reads %+v, %v; want %+v", after, err, before)
			}
			for i := range after {
				if after[i].Convention != workload.Tessera || after[i].Container != before[i].Container || !reflect.DeepEqual(after[i].GPU, before[i].GPU) {
					t.Errorf("scheduler reads %+v; want the original request %+v under Tessera's keys", after[i], before[i])
				}
			}
			// Each fixed share is counted for quotas.
			policy, _, _, _ := workload.PlacementPolicy(tc.pod)
			checkMigrated(t, migrationCase{want: tesseraRequests(t, "the patched pod", got, cat), ann: tc.ann, policy: policy}, got, cat)
			// ...and the agent expects one device per GPU of those requests.
			if cs := agentkube.FromAPI(got).Containers; !reflect.DeepEqual(cs, wantDevices) {
				t.Errorf("agent sees device requests %+v, want %+v", cs, wantDevices)
			}
			// A translated pod needs no further change.
			if ops, err := h.Mutate(got); err != nil || ops != nil {
				t.Errorf("the translated pod is mutated again: %v %v", ops, err)
			}
		})
	}
}

func slicesContains(s []corev1.ResourceName, v corev1.ResourceName) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestReviewDeniesBadResourceRequests(t *testing.T) {
	long := strings.Repeat("c", 63)
	c := func(name string, r corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{Name: name, Resources: r}
	}
	initPod := testPod(nil, c("main", limits("nvidia.com/gpu", "1")))
	initPod.Spec.InitContainers = []corev1.Container{c("setup", limits("nvidia.com/gpu", "1"))}
	tests := []deniedCase{
		{"zero GPUs", testPod(nil, c("main", limits("nvidia.com/gpu", "0"))),
			[]string{"resource nvidia.com/gpu of container main", "[1, 16]", "got 0"}},
		{"too many GPUs", testPod(nil, c("main", limits("nvidia.com/gpu", "17"))),
			[]string{"resource nvidia.com/gpu of container main", "[1, 16]", "got 17"}},
		{"gpucores above 100", testPod(nil, c("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "150"))),
			[]string{"resource nvidia.com/gpucores of container main", "[1, 100]", "got 150"}},
		{"gpumem-percentage zero", testPod(nil, c("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "0"))),
			[]string{"resource nvidia.com/gpumem-percentage of container main", "[1, 100]"}},
		{"gpumem and gpumem-percentage", testPod(nil, c("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "1000", "nvidia.com/gpumem-percentage", "10"))),
			[]string{"resource nvidia.com/gpumem-percentage of container main", "conflicts with nvidia.com/gpumem"}},
		{"gpumem without nvidia.com/gpu", testPod(nil, c("main", limits("nvidia.com/gpumem", "1000"))),
			[]string{"resource nvidia.com/gpumem of container main", "needs nvidia.com/gpu"}},
		{"tessera.io/gpu and nvidia.com/gpu in one container", testPod(nil, c("main", limits(workload.ResourceGPU, "1", "nvidia.com/gpu", "1"))),
			[]string{"resource tessera.io/gpu of container main", "conflicts with nvidia.com/gpu"}},
		{"tessera.io/gpu and HAMi resources in one container", testPod(nil, c("main", limits(workload.ResourceGPU, "1", "nvidia.com/gpu", "1", "nvidia.com/gpucores", "20"))),
			[]string{"resource tessera.io/gpu of container main", "conflicts with nvidia.com/gpumem"}},
		{"Tessera annotation with nvidia.com/gpu", testPod(map[string]string{workload.AnnotationCompute: "0.5"}, c("main", limits("nvidia.com/gpu", "1"))),
			[]string{"annotation tessera.io/gpu-fraction of container main", "conflicts with resource nvidia.com/gpu"}},
		{"Tessera annotation with HAMi resources", testPod(map[string]string{workload.AnnotationMemory + ".main": "1Gi"}, c("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "1000"))),
			[]string{"annotation tessera.io/gpu-memory.main of container main", "conflicts with resource nvidia.com/gpu: use either hami's resources or Tessera annotations"}},
		{"nvidia.com/gpu in an init container", initPod,
			[]string{"resource nvidia.com/gpu of container setup", "init containers are not supported"}},
		{"request unlike the limit", testPod(nil, c("main", withRequests(limits("nvidia.com/gpu", "2"), "nvidia.com/gpu", "1"))),
			[]string{"resource nvidia.com/gpu of container main", "request 1 must equal the limit 2"}},
		{"HAMi request without a limit", testPod(nil, c("main", withRequests(limits("nvidia.com/gpu", "1"), "nvidia.com/gpu", "1", "nvidia.com/gpucores", "20"))),
			[]string{"resource nvidia.com/gpucores of container main", "request 20 has no limit"}},
		{"tessera.io/gpu requested beside nvidia.com/gpu", testPod(nil, c("main", withRequests(limits("nvidia.com/gpu", "1"), "nvidia.com/gpu", "1", workload.ResourceGPU, "1"))),
			[]string{"resource tessera.io/gpu of container main", "request GPUs one way"}},
		{"two HAMi containers, one name too long for KEY.<container>", testPod(nil,
			c(long, limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "20")), c("b", limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "30"))),
			[]string{"resource nvidia.com/gpu of container " + long, "tessera.io/gpu-fraction." + long, "shorten the container name"}},
	}
	expectDenied(t, tests)
}

// deniedCase is a pod the webhook must deny with every string of want in
// its message.
type deniedCase struct {
	name string
	pod  *corev1.Pod
	want []string
}

// expectDenied reviews each case's pod and checks it is denied (422, no
// patch) with the wanted parts in its message.
func expectDenied(t *testing.T, tests []deniedCase) {
	t.Helper()
	h := newHandler(t)
	for _, tc := range tests {
		resp := review(t, h, admissionv1.Create, podKind, tc.pod)
		if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s: response %+v, want denied with code 422", tc.name, resp)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(resp.Result.Message, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, resp.Result.Message, w)
			}
		}
	}
}
