package admission

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// checkJobSets creates JobSets through the real API server of
// TestMigrationOnRealAPIServer (the webhook registered, with the chart's
// match conditions), with JobSet's CRD of the version tools/kueue's Kueue
// is built against. Their stored templates carry tessera.io/gpu-milli
// (Kueue counts a JobSet's templates at creation), also where a template
// has no metadata; a JobSet whose templates name no scheduler, which the
// API server does not default, is stored as sent (the match conditions
// test each field before reading it); a wrong gpu-milli is refused naming
// the replicated Job.
func checkJobSets(t *testing.T, cfg *rest.Config, ns string) {
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(cfg)
	file, err := testcluster.JobSetCRDFile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, dyn, manifest); err != nil {
		t.Fatalf("install JobSet's CRD: %v", err)
	}
	jobsets := dyn.Resource(schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}).Namespace(ns)
	create := func(name string, pod *corev1.Pod) (*JobSet, error) {
		t.Helper()
		raw, err := json.Marshal(testJobSet(pod))
		if err != nil {
			t.Fatal(err)
		}
		var obj unstructured.Unstructured
		if err := json.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetName(name)
		obj.SetNamespace(ns)
		got, err := jobsets.Create(ctx, &obj, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if raw, err = got.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		var js JobSet
		if err := json.Unmarshal(raw, &js); err != nil {
			t.Fatal(err)
		}
		return &js, nil
	}
	noScheduler := testPod(nil, ctr("main", limits("nvidia.com/gpu", "1")))
	noScheduler.Spec.SchedulerName = ""
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod      // the workers' template
		milli map[string]int64 // the workers' gpu-milli per container; absent: none
		ann   map[string]string
	}{
		{"quarter", testPod(map[string]string{workload.AnnotationCompute: "0.25"}, ctr("main", limits(workload.ResourceGPU, "1"))),
			map[string]int64{"main": 250}, map[string]string{workload.AnnotationCompute: "0.25"}},
		{"hami", testPod(nil, ctr("main", limits("nvidia.com/gpu", "2"))), // a template without metadata
			map[string]int64{"main": 2000}, map[string]string{AnnotationMigratedFrom: "main:nvidia.com/gpu=2"}},
		{"no-scheduler", noScheduler, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := create(tc.name, tc.pod)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if n := len(js.Spec.ReplicatedJobs); n != 2 {
				t.Fatalf("%d replicated Jobs stored, want 2", n)
			}
			for i, rj := range js.Spec.ReplicatedJobs {
				tmpl := rj.Template.Spec.Template
				var ann map[string]string
				if tmpl.Metadata != nil {
					ann = tmpl.Metadata.Annotations
				}
				if i == 1 && !maps.Equal(ann, tc.ann) {
					t.Errorf("%s: annotations %v, want %v", rj.Name, ann, tc.ann)
				}
				for _, c := range tmpl.Spec.Containers {
					lim, inLim := c.Resources.Limits[workload.ResourceGPUMilli]
					req := c.Resources.Requests[workload.ResourceGPUMilli]
					var want int64
					if i == 1 {
						want = tc.milli[c.Name]
					}
					if (want == 0) == inLim || lim.Value() != want || req.Value() != want {
						t.Errorf("%s container %s: %s limit %s, request %s; want %d", rj.Name, c.Name, workload.ResourceGPUMilli, lim.String(), req.String(), want)
					}
				}
			}
		})
	}
	_, err = create("lies", testPod(map[string]string{workload.AnnotationCompute: "0.25"},
		ctr("main", limits(workload.ResourceGPU, "1", workload.ResourceGPUMilli, "1000"))))
	if want := "spec.replicatedJobs[1] (workers): resource tessera.io/gpu-milli of container main"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a JobSet with a wrong gpu-milli: error %v, want the webhook's refusal (%q)", err, want)
	}
}
