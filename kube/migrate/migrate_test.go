package migrate

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/queueing"
)

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

// Objects written from the upstream projects' documented fields.
const (
	kaiQueue = `
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  parentQueue: department-a
  priority: 100
  resources:
    gpu: {quota: 4, limit: 8, overQuotaWeight: 2}
    cpu: {quota: 16000, limit: -1, overQuotaWeight: 1}
    memory: {quota: 64000, limit: -1, overQuotaWeight: 1}
`
	volcanoQueue = `
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: training}
spec:
  weight: 3
  reclaimable: false
  deserved: {nvidia.com/gpu: "2", cpu: "8", memory: 32Gi}
  capability: {nvidia.com/gpu: "4", cpu: "16", example.com/fpga: "1"}
  guarantee: {resource: {cpu: "1"}}
`
	volcanoGroup = `
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: job-1, namespace: ml}
spec:
  minMember: 3
  queue: training
  minResources: {cpu: "3"}
`
)

func TestTranslate(t *testing.T) {
	res := Translate([]*unstructured.Unstructured{parse(t, kaiQueue), parse(t, volcanoQueue), parse(t, volcanoGroup),
		parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ml}\n")})
	if len(res.Objects) != 3 {
		t.Fatalf("objects %v, want 3", res.Objects)
	}
	q, err := queues.FromObject(res.Objects[0])
	want := queueing.Queue{Name: "research", Parent: "department-a", Priority: 100, Weight: 2,
		Guaranteed: queueing.Resources{GPUMilli: 4000, CPUMilli: 16000, MemoryMiB: 61036}, Limit: queueing.Resources{GPUMilli: 8000}}
	if err != nil || q != want {
		t.Errorf("KAI queue = %+v, %v\nwant %+v", q, err, want)
	}
	q, err = queues.FromObject(res.Objects[1])
	want = queueing.Queue{Name: "training", Weight: 3,
		Guaranteed: queueing.Resources{GPUMilli: 2000, CPUMilli: 8000, MemoryMiB: 32768}, Limit: queueing.Resources{GPUMilli: 4000, CPUMilli: 16000}}
	if err != nil || q != want {
		t.Errorf("Volcano queue = %+v, %v\nwant %+v", q, err, want)
	}
	g, err := podgroups.FromObject(res.Objects[2])
	if err != nil || g != (podgroups.Group{Namespace: "ml", Name: "job-1", MinMember: 3}) || res.Objects[2].GetAPIVersion() != "tessera.io/v1alpha1" {
		t.Errorf("PodGroup = %+v, %v (%s)", g, err, res.Objects[2].GetAPIVersion())
	}
	var got []string
	for _, l := range res.Losses {
		got = append(got, l.String())
	}
	wantLosses := []string{
		"Queue research: spec.resources.memory.quota: KAI counts memory in MB; written in Mi, rounded up",
		"Queue training: spec.capability.example.com/fpga: no Tessera equivalent",
		"Queue training: spec.guarantee: Volcano reserves these resources",
		"Queue training: spec.reclaimable: false: Tessera always reclaims",
		"PodGroup ml/job-1: metadata.name: pods join the Tessera PodGroup with label tessera.io/pod-group: job-1",
		"PodGroup ml/job-1: spec.queue: a Tessera PodGroup has no queue: label its pods tessera.io/queue: training",
		"PodGroup ml/job-1: spec.minResources: no Tessera equivalent",
		"ConfigMap ml/x: kind: /v1, Kind=ConfigMap is not a kind tessera migrate translates",
	}
	if len(got) != len(wantLosses) {
		t.Fatalf("losses:\n%s\nwant %d", strings.Join(got, "\n"), len(wantLosses))
	}
	for i := range got {
		if !strings.HasPrefix(got[i], wantLosses[i]) {
			t.Errorf("loss %d = %q, want prefix %q", i, got[i], wantLosses[i])
		}
	}
}

func TestTranslateKAIWeights(t *testing.T) {
	res := Translate([]*unstructured.Unstructured{parse(t, `
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: q}
spec:
  resources:
    gpu: {quota: 0.5, limit: -1, overQuotaWeight: 1.5}
    cpu: {overQuotaWeight: 3}
`)})
	spec := res.Objects[0].Object["spec"]
	if !reflect.DeepEqual(spec, map[string]any{"guaranteed": map[string]any{"gpu": "0.5"}}) {
		t.Errorf("spec %v", spec)
	}
	if len(res.Losses) != 2 || res.Losses[0].Field != "spec.resources.gpu.overQuotaWeight" || res.Losses[1].Field != "spec.resources.cpu.overQuotaWeight" {
		t.Errorf("losses %v", res.Losses)
	}
}
