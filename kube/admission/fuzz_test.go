package admission

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
		patch, _ := json.Marshal(ops)
		got := patched(t, pod, patch)
		after, err := workload.FromPod(got, h.cfg.Catalog)
		if err != nil || len(after) != 1 || !reflect.DeepEqual(after[0].GPU, before[0].GPU) {
			t.Fatalf("patched pod reads as %+v, %v; want %+v", after, err, before)
		}
		if q := got.Spec.Containers[0].Resources.Limits[workload.ResourceGPU]; q.Value() != int64(before[0].GPU.Count) {
			t.Fatalf("%s limit %s for %d GPUs", workload.ResourceGPU, q.String(), before[0].GPU.Count)
		}
	})
}

// FuzzMutateResources feeds arbitrary nvidia.com/gpu and HAMi resource
// values ("" leaves one out) to a pod with a second, plain nvidia.com/gpu
// container: the webhook either denies the pod or patches it into a pod
// the scheduler reads as the same requests, under tessera.io/gpu only.
func FuzzMutateResources(f *testing.F) {
	for _, s := range [][4]string{{"1", "", "", ""}, {"2", "3000", "", "30"}, {"1", "", "50", ""}, {"1", "", "25", "25"}, {"0", "", "", ""}, {"1", "1.5", "", "150"}, {"", "1000", "", ""}, {"3", "", "", "100"}} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	h, err := New(Config{SchedulerName: "tessera", Catalog: catalog.Default()})
	if err != nil {
		f.Fatal(err)
	}
	keys := []string{workload.ResourceNVIDIAGPU, workload.HAMiResourceMemory, workload.HAMiResourceMemoryPercent, workload.HAMiResourceCores}
	f.Fuzz(func(t *testing.T, gpu, mem, pct, cores string) {
		lim := corev1.ResourceList{}
		for i, v := range []string{gpu, mem, pct, cores} {
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return
			}
			lim[corev1.ResourceName(keys[i])] = q
		}
		pod := testPod(nil,
			corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Limits: lim}},
			corev1.Container{Name: "aux", Resources: limits(workload.ResourceNVIDIAGPU, "1")})
		ops, err := h.Mutate(pod)
		if err != nil {
			return
		}
		before, err := workload.FromPod(pod, h.cfg.Catalog)
		if err != nil || len(ops) == 0 {
			t.Fatalf("allowed a pod kube/workload reads as %+v, %v with patch %+v", before, err, ops)
		}
		patch, _ := json.Marshal(ops)
		got := patched(t, pod, patch)
		after, err := workload.FromPod(got, h.cfg.Catalog)
		if err != nil || len(after) != len(before) {
			t.Fatalf("patched pod reads as %+v, %v; want %+v", after, err, before)
		}
		for i := range after {
			if after[i].Convention != workload.Tessera || !reflect.DeepEqual(after[i].GPU, before[i].GPU) {
				t.Fatalf("container %s reads as %+v; want %+v under Tessera's keys", after[i].Container, after[i], before[i])
			}
			c := got.Spec.Containers[i]
			if q := c.Resources.Limits[workload.ResourceGPU]; q.Value() != int64(before[i].GPU.Count) {
				t.Fatalf("container %s: %s limit %s for %d GPUs", c.Name, workload.ResourceGPU, q.String(), before[i].GPU.Count)
			}
			for _, k := range keys {
				if _, ok := c.Resources.Limits[corev1.ResourceName(k)]; ok {
					t.Fatalf("container %s keeps %s", c.Name, k)
				}
			}
		}
	})
}
