package admission

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// FuzzMutate feeds arbitrary KAI annotation values: the webhook either
// denies the pod or patches it into a pod the scheduler reads as the same
// request, with one tessera.io/gpu per GPU.
func FuzzMutate(f *testing.F) {
	for _, s := range [][3]string{{"0.5", "", ""}, {"", "2000", "2"}, {"25%", "", "16"}, {"1.5", "", ""}, {"", "2Gi", ""}, {"250m", "", "0"}} {
		f.Add(s[0], s[1], s[2])
	}
	h, err := New(Config{SchedulerName: "tessera", Catalog: catalog.Default()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frac, mem, num string) {
		ann := map[string]string{}
		for k, v := range map[string]string{workload.KAIAnnotationFraction: frac, workload.KAIAnnotationMemory: mem, workload.KAIAnnotationNumDevices: num} {
			if v != "" {
				ann[k] = v
			}
		}
		pod := testPod(ann)
		ops, err := h.Mutate(pod)
		if err != nil || len(ops) == 0 {
			return
		}
		before, err := workload.FromPod(pod, h.cfg.Catalog)
		if err != nil {
			t.Fatalf("patched a pod kube/workload rejects: %v", err)
		}
		raw, _ := json.Marshal(pod)
		patch, _ := json.Marshal(ops)
		out, err := applyPatch(raw, patch)
		if err != nil {
			t.Fatalf("patch %s does not apply: %v", patch, err)
		}
		var got corev1.Pod
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		after, err := workload.FromPod(&got, h.cfg.Catalog)
		if err != nil || len(after) != 1 || !reflect.DeepEqual(after[0].GPU, before[0].GPU) {
			t.Fatalf("patched pod reads as %+v, %v; want %+v", after, err, before)
		}
		if q := got.Spec.Containers[0].Resources.Limits[workload.ResourceGPU]; q.Value() != int64(before[0].GPU.Count) {
			t.Fatalf("%s limit %s for %d GPUs", workload.ResourceGPU, q.String(), before[0].GPU.Count)
		}
	})
}
