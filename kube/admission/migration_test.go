package admission

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

// migrationCase is a pod written from an upstream system's documentation
// (schedulerName changed to Tessera's) and what Tessera must make of it:
// the request of each GPU container as the scheduler reads the patched pod,
// the placement policy, annotations the patched pod must carry, or the
// refusal.
type migrationCase struct {
	name   string
	pod    *corev1.Pod
	want   map[string]request.GPU // container -> request, after the patch
	policy string                 // placement policy the patched pod names
	ann    map[string]string      // annotations (and labels, prefix "label:") the patched pod must carry
	denied string                 // part of the refusal
}

func ctr(name string, r corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{Name: name, Image: "cuda", Resources: r}
}

func shareOf(count int, compute, limit, mem int64) request.GPU {
	return request.GPU{Count: count, ComputeMilli: compute, ComputeLimitMilli: limit, MemoryMiB: mem}
}

func migrationCases() []migrationCase {
	jobPod := func(ann map[string]string, cs ...corev1.Container) *corev1.Pod {
		p := testPod(ann, cs...)
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "hpo", UID: "u1", Controller: &yes}}
		return p
	}
	labelled := func(p *corev1.Pod, kv ...string) *corev1.Pod {
		p.Labels = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
		return p
	}
	initPod := func(ann map[string]string, cs ...corev1.Container) *corev1.Pod {
		if len(cs) == 0 {
			cs = []corev1.Container{ctr("main", corev1.ResourceRequirements{})}
		}
		p := testPod(ann, cs...)
		p.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "cuda"}}
		return p
	}
	return []migrationCase{
		// KAI-Scheduler.
		{name: "KAI fraction", pod: testPod(map[string]string{"gpu-fraction": "0.5"}),
			want: map[string]request.GPU{"main": shareOf(1, 500, 1000, 0)}},
		{name: "KAI memory", pod: testPod(map[string]string{"gpu-memory": "2000"}),
			want: map[string]request.GPU{"main": shareOf(1, 0, 1000, 2000)}},
		{name: "KAI memory on two devices", pod: testPod(map[string]string{"gpu-memory": "4000", "gpu-fraction-num-devices": "2"}),
			want: map[string]request.GPU{"main": shareOf(2, 0, 1000, 4000)}},
		{name: "KAI container name",
			pod:  testPod(map[string]string{"gpu-fraction": "0.5", "gpu-fraction-container-name": "gpu-workload"}, ctr("sidecar", limits("cpu", "100m")), ctr("gpu-workload", corev1.ResourceRequirements{})),
			want: map[string]request.GPU{"gpu-workload": shareOf(1, 500, 1000, 0)},
			ann:  map[string]string{AnnotationMigratedFrom: "gpu-fraction-container-name=gpu-workload,gpu-fraction=0.5"}},
		{name: "KAI container name on an init container", pod: initPod(map[string]string{"gpu-fraction": "0.5", "gpu-fraction-container-name": "prepare"}),
			denied: "annotation gpu-fraction-container-name: names init container prepare: Tessera gives GPUs to regular containers only"},
		{name: "KAI queue label", pod: labelled(testPod(map[string]string{"gpu-fraction": "0.25"}), "kai.scheduler/queue", "research"),
			want: map[string]request.GPU{"main": shareOf(1, 250, 1000, 0)}, ann: map[string]string{"label:kai.scheduler/queue": "research"}},
		{name: "KAI queue label against Tessera's", pod: labelled(testPod(map[string]string{"gpu-fraction": "0.25"}), "kai.scheduler/queue", "research", "tessera.io/queue", "prod"),
			denied: `label kai.scheduler/queue: label "research" disagrees with label tessera.io/queue "prod"`},
		{name: "KAI min member on a Job's pod", pod: jobPod(map[string]string{"kai.scheduler/batch-min-member": "2"}, ctr("main", limits("nvidia.com/gpu", "1"))),
			want: map[string]request.GPU{"main": shareOf(1, 1000, 1000, 0)}, ann: map[string]string{"kai.scheduler/batch-min-member": "2"}},
		{name: "KAI min member on a bare pod", pod: testPod(map[string]string{"kai.scheduler/batch-min-member": "2"}, ctr("main", limits("nvidia.com/gpu", "1"))),
			denied: `annotation kai.scheduler/batch-min-member: set to "2" on a pod that no Job controls`},
		// NVIDIA's device plugin.
		{name: "nvidia.com/gpu", pod: testPod(nil, ctr("cuda", limits("nvidia.com/gpu", "2"))),
			want: map[string]request.GPU{"cuda": shareOf(2, 1000, 1000, 0)}},
		// HAMi.
		{name: "HAMi gpumem", pod: testPod(nil, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000"))),
			want: map[string]request.GPU{"main": shareOf(1, 0, 1000, 3000)}},
		{name: "HAMi gpucores", pod: testPod(nil, ctr("main", limits("nvidia.com/gpu", "2", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"))),
			want: map[string]request.GPU{"main": shareOf(2, 300, 300, 3000)}},
		{name: "HAMi gpumem-percentage apart from gpucores", pod: testPod(nil, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "50", "nvidia.com/gpucores", "20"))),
			want: map[string]request.GPU{"main": {Count: 1, ComputeMilli: 200, ComputeLimitMilli: 200, MemoryShareMilli: 500}},
			ann:  map[string]string{workload.AnnotationMemory + ".main": "50%", workload.AnnotationCompute + ".main": "20%"}},
		{name: "HAMi use-gputype", pod: testPod(map[string]string{"nvidia.com/use-gputype": "A100,V100"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"))),
			want: map[string]request.GPU{"main": {Count: 1, ComputeMilli: 300, ComputeLimitMilli: 300, MemoryMiB: 3000, Models: []string{"A100-40GB", "A100-80GB", "V100-16GB", "V100-32GB"}}},
			ann:  map[string]string{workload.AnnotationModel: "A100-40GB,A100-80GB,V100-16GB,V100-32GB", AnnotationMigratedFrom: `main:nvidia.com/gpu=1,main:nvidia.com/gpucores=30,main:nvidia.com/gpumem=3000,nvidia.com/use-gputype="A100,V100"`}},
		{name: "HAMi nouse-gputype", pod: testPod(map[string]string{"nvidia.com/nouse-gputype": "NVIDIA A10,Tesla"}, ctr("main", limits("nvidia.com/gpu", "1"))),
			want: map[string]request.GPU{"main": {Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: nonMatching(catalog.Default(), "NVIDIA A10", "TESLA")}}},
		{name: "HAMi use-gpuuuid", pod: testPod(map[string]string{"nvidia.com/use-gpuuuid": "GPU-AAA,GPU-BBB"}, ctr("main", limits("nvidia.com/gpu", "1"))),
			denied: "annotation nvidia.com/use-gpuuuid: Tessera does not pin pods to (or away from) GPU UUIDs"},
		{name: "HAMi nouse-gpuuuid", pod: testPod(map[string]string{"nvidia.com/nouse-gpuuuid": "GPU-AAA"}, ctr("main", limits("nvidia.com/gpu", "1"))),
			denied: "annotation nvidia.com/nouse-gpuuuid: Tessera does not pin pods"},
		{name: "HAMi vgpu-mode", pod: testPod(map[string]string{"nvidia.com/vgpu-mode": "hami-core"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000"))),
			want: map[string]request.GPU{"main": shareOf(1, 0, 1000, 3000)}, ann: map[string]string{AnnotationMigratedFrom: "main:nvidia.com/gpu=1,main:nvidia.com/gpumem=3000,nvidia.com/vgpu-mode=hami-core"}},
		// HAMi's own example (two instances of at least 8000 MiB), on A100s:
		// both A100 models have 1g.10gb as the smallest profile holding it.
		{name: "HAMi vgpu-mode mig", pod: testPod(map[string]string{"nvidia.com/vgpu-mode": "mig", "nvidia.com/use-gputype": "A100"}, ctr("main", limits("nvidia.com/gpu", "2", "nvidia.com/gpumem", "8000"))),
			want: map[string]request.GPU{"main": {Count: 2, ComputeMilli: 1000, ComputeLimitMilli: 1000, MIGProfile: "1g.10gb", Models: []string{"A100-40GB", "A100-80GB"}}},
			ann: map[string]string{workload.AnnotationMIGProfile + ".main": "1g.10gb", workload.AnnotationModel + ".main": "A100-40GB,A100-80GB",
				AnnotationMigratedFrom: "main:nvidia.com/gpu=2,main:nvidia.com/gpumem=8000,nvidia.com/use-gputype=A100,nvidia.com/vgpu-mode=mig"}},
		{name: "HAMi vgpu-mode mig on models whose profiles differ", pod: testPod(map[string]string{"nvidia.com/vgpu-mode": "mig", "nvidia.com/use-gputype": "A100,H200"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "8000"))),
			denied: `annotation nvidia.com/vgpu-mode of container main: "mig" with nvidia.com/gpumem 8000: the smallest MIG profile holding it differs between the models nvidia.com/use-gputype allows`},
		{name: "HAMi policies binpack", pod: testPod(map[string]string{"hami.io/node-scheduler-policy": "binpack", "hami.io/gpu-scheduler-policy": "binpack"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"))),
			want: map[string]request.GPU{"main": shareOf(1, 300, 300, 3000)}, policy: "binpack"},
		{name: "HAMi policies spread", pod: testPod(map[string]string{"hami.io/node-scheduler-policy": "spread"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "30"))),
			want: map[string]request.GPU{"main": shareOf(1, 300, 300, 0)}, policy: "spread"},
		{name: "HAMi policies mixed", pod: testPod(map[string]string{"hami.io/gpu-scheduler-policy": "spread"}, ctr("main", limits("nvidia.com/gpu", "1", "nvidia.com/gpucores", "30"))),
			denied: "annotation hami.io/gpu-scheduler-policy: node policy binpack with GPU policy spread has no Tessera equivalent"},
		// Volcano.
		{name: "Volcano vgpu", pod: testPod(nil, ctr("log", limits("cpu", "100m")), ctr("infer", limits("volcano.sh/vgpu-number", "2", "volcano.sh/vgpu-memory", "3000", "volcano.sh/vgpu-cores", "50"))),
			want: map[string]request.GPU{"infer": shareOf(2, 500, 500, 3000)},
			ann:  map[string]string{AnnotationMigratedFrom: "infer:volcano.sh/vgpu-cores=50,infer:volcano.sh/vgpu-memory=3000,infer:volcano.sh/vgpu-number=2"}},
		{name: "Volcano vgpu-memory-percentage", pod: testPod(nil, ctr("main", limits("volcano.sh/vgpu-number", "1", "volcano.sh/vgpu-memory-percentage", "25"))),
			want: map[string]request.GPU{"main": shareOf(1, 250, 1000, 0)}},
		{name: "Volcano group with a Tessera group", pod: labelled(testPod(map[string]string{"scheduling.k8s.io/group-name": "job-1"}, ctr("main", limits("volcano.sh/vgpu-number", "1"))), "tessera.io/pod-group", "g"),
			denied: `annotation scheduling.k8s.io/group-name: names Volcano PodGroup "job-1" while label tessera.io/pod-group names "g"`},
		// scheduler-plugins (Kubeflow, JobSet).
		{name: "scheduler-plugins group with a Volcano group", pod: labelled(testPod(map[string]string{"scheduling.k8s.io/group-name": "job-1"}, ctr("main", limits("volcano.sh/vgpu-number", "1"))), "scheduling.x-k8s.io/pod-group", "pg"),
			denied: `label scheduling.x-k8s.io/pod-group: names PodGroup "pg" while annotation scheduling.k8s.io/group-name names Volcano PodGroup "job-1"`},
		// nvshare: a tenth of a GPU guaranteed, the whole card's compute and
		// memory as the limit, on a node that oversubscribes memory.
		{name: "nvshare", pod: testPod(nil, ctr("main", limits("nvshare.com/gpu", "1"))),
			want: map[string]request.GPU{"main": {Count: 1, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}},
			ann: map[string]string{workload.AnnotationCompute + ".main": "0.1", workload.AnnotationComputeLimit + ".main": "1", workload.AnnotationMemoryLimit + ".main": "100%",
				workload.AnnotationOversubscribe: "true", AnnotationMigratedFrom: "main:nvshare.com/gpu=1"}},
		{name: "nvshare beside a sidecar and an init container", pod: initPod(nil, ctr("log", limits("cpu", "100m")), ctr("notebook", limits("nvshare.com/gpu", "1"))),
			want: map[string]request.GPU{"notebook": {Count: 1, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}},
			ann:  map[string]string{workload.AnnotationOversubscribe: "true", AnnotationMigratedFrom: "notebook:nvshare.com/gpu=1"}},
		{name: "nvshare, two", pod: testPod(nil, ctr("main", limits("nvshare.com/gpu", "2"))),
			denied: "resource nvshare.com/gpu of container main: must be 1, got 2: nvshare hands a container the node's one GPU whatever the count"},
		{name: "nvshare on a pod that refuses oversubscription", pod: testPod(map[string]string{"tessera.io/oversubscribe": "false"}, ctr("main", limits("nvshare.com/gpu", "1"))),
			denied: `annotation tessera.io/oversubscribe: "false" conflicts with resource nvshare.com/gpu of container main`},
	}
}

// nonMatching lists the catalog models none of whose names contain any of
// the (upper-case) entries.
func nonMatching(cat *catalog.Catalog, entries ...string) []string {
	var out []string
	for _, m := range cat.Models() {
		hit := false
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			for _, e := range entries {
				hit = hit || strings.Contains(strings.ToUpper(n), e)
			}
		}
		if !hit {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestMigration(t *testing.T) {
	h := newHandler(t)
	cat := catalog.Default()
	for _, tc := range migrationCases() {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, h, admissionv1.Create, podKind, tc.pod)
			if tc.denied != "" {
				if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.denied) {
					t.Fatalf("response %+v, want denied with %q", resp.Result, tc.denied)
				}
				return
			}
			got := tc.pod
			if resp.Patch != nil {
				got = patchPod(t, tc.pod, resp)
			} else if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			checkMigrated(t, tc, got, cat)
		})
	}
}

// tesseraRequests is each container's GPU request in pod as the scheduler
// reads it, failing the test when the pod does not read or a container is
// still in another convention than Tessera's.
func tesseraRequests(t *testing.T, what string, pod *corev1.Pod, cat *catalog.Catalog) map[string]request.GPU {
	t.Helper()
	reqs, err := workload.FromPod(pod, cat)
	if err != nil {
		t.Fatalf("%s reads as an error: %v", what, err)
	}
	out := map[string]request.GPU{}
	for _, r := range reqs {
		if r.Convention != workload.Tessera {
			t.Errorf("container %s still uses convention %s", r.Container, r.Convention)
		}
		out[r.Container] = r.GPU
	}
	return out
}

// checkMigrated checks a translated pod against its case.
func checkMigrated(t *testing.T, tc migrationCase, got *corev1.Pod, cat *catalog.Catalog) {
	t.Helper()
	if gotReqs := tesseraRequests(t, "the patched pod", got, cat); !reflect.DeepEqual(gotReqs, tc.want) {
		t.Errorf("requests %+v, want %+v", gotReqs, tc.want)
	}
	for _, c := range got.Spec.Containers {
		_, has := c.Resources.Limits[workload.ResourceGPU]
		if _, want := tc.want[c.Name]; has != want {
			t.Errorf("container %s: has %s %v, want %v (%+v)", c.Name, workload.ResourceGPU, has, want, c.Resources)
		}
	}
	// Each fixed share is counted for quotas, in thousandths over all the
	// container's GPUs; a share that follows memory is not.
	for _, c := range got.Spec.Containers {
		g := tc.want[c.Name]
		want := int64(g.Count) * g.ComputeMilli
		lim, inLim := c.Resources.Limits[workload.ResourceGPUMilli]
		req, inReq := c.Resources.Requests[workload.ResourceGPUMilli]
		if inLim != (want > 0) || inReq != (want > 0) || lim.Value() != want || req.Value() != want {
			t.Errorf("container %s: %s limit %s (%v), request %s (%v); want %d", c.Name, workload.ResourceGPUMilli, lim.String(), inLim, req.String(), inReq, want)
		}
	}
	policy, _, _, err := workload.PlacementPolicy(got)
	if err != nil || policy != tc.policy {
		t.Errorf("placement policy %q (%v), want %q", policy, err, tc.policy)
	}
	for k, v := range tc.ann {
		have := got.Annotations[k]
		if l, ok := strings.CutPrefix(k, "label:"); ok {
			have = got.Labels[l]
		}
		if have != v {
			t.Errorf("%s = %q, want %q (annotations %v)", k, have, v, got.Annotations)
		}
	}
	// No key of another system is left that means something the patched
	// pod does not say, except those the scheduler reads.
	for _, row := range Table() {
		if row.How == Scheduler || row.On != OnAnnotation {
			continue
		}
		if _, left := got.Annotations[row.Key]; left {
			t.Errorf("annotation %s left on the patched pod", row.Key)
		}
	}
}

// TestEveryTableRowHasItsCase keeps the table and its tests together: each
// row names a case of migrationCases, and that case's pod carries the row's
// key.
func TestEveryTableRowHasItsCase(t *testing.T) {
	cases := map[string]migrationCase{}
	for _, c := range migrationCases() {
		cases[c.name] = c
	}
	seen := map[string]bool{}
	for _, row := range Table() {
		if seen[row.System+row.Key] {
			t.Errorf("key %s of %s has two rows", row.Key, row.System)
		}
		seen[row.System+row.Key] = true
		if row.How != Exact && row.How != Refused && row.How != Scheduler {
			t.Errorf("row %s: how %q", row.Key, row.How)
		}
		c, ok := cases[row.Test]
		if !ok {
			t.Errorf("row %s names case %q, which migrationCases lacks", row.Key, row.Test)
			continue
		}
		if !carries(c.pod, row) {
			t.Errorf("row %s: case %q does not carry the key", row.Key, row.Test)
		}
		if row.How == Refused && c.denied == "" {
			t.Errorf("row %s is refused but case %q expects no refusal", row.Key, row.Test)
		}
	}
}

func carries(p *corev1.Pod, row Row) bool {
	switch row.On {
	case OnAnnotation:
		_, ok := p.Annotations[row.Key]
		return ok
	case OnLabel:
		_, ok := p.Labels[row.Key]
		return ok
	}
	for _, c := range append(append([]corev1.Container(nil), p.Spec.Containers...), p.Spec.InitContainers...) {
		if _, ok := c.Resources.Limits[corev1.ResourceName(row.Key)]; ok {
			return true
		}
	}
	return false
}
