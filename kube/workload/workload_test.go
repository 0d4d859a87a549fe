package workload

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/request"
)

type ctr struct {
	name   string
	limits map[string]string
}

func pod(ann map[string]string, cs ...ctr) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann}}
	for _, c := range cs {
		rl := corev1.ResourceList{}
		for k, v := range c.limits {
			rl[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c.name, Resources: corev1.ResourceRequirements{Limits: rl}})
	}
	return p
}

// nvshareGPU is what nvshare.com/gpu: 1 asks.
func nvshareGPU() request.GPU {
	return request.GPU{Count: 1, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}
}

func gpu(count int, compute, limit, mem, memLimit int64) request.GPU {
	return request.GPU{Count: count, ComputeMilli: compute, ComputeLimitMilli: limit, MemoryMiB: mem, MemoryLimitMiB: memLimit}
}

func TestFromPod(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []ContainerRequest
	}{
		{"no GPUs", pod(nil, ctr{"c", map[string]string{"cpu": "1"}}), nil},
		{"tessera whole GPUs", pod(nil, ctr{"c", map[string]string{ResourceGPU: "2"}}),
			[]ContainerRequest{{"c", gpu(2, 1000, 1000, 0, 0), Tessera, false}}},
		{"tessera fraction with burst",
			pod(map[string]string{AnnotationCompute: "0.25", AnnotationComputeLimit: "0.8", AnnotationMemory: "20Gi"},
				ctr{"c", map[string]string{ResourceGPU: "1"}}),
			[]ContainerRequest{{"c", gpu(1, 250, 800, 20480, 0), Tessera, false}}},
		{"gpu-milli equal to the share, for quotas",
			pod(map[string]string{AnnotationCompute: "0.25"}, ctr{"c", map[string]string{ResourceGPU: "2", ResourceGPUMilli: "500"}}),
			[]ContainerRequest{{"c", gpu(2, 250, 250, 0, 0), Tessera, false}}},
		{"gpu-milli of whole GPUs", pod(nil, ctr{"c", map[string]string{ResourceGPU: "1", ResourceGPUMilli: "1000"}}),
			[]ContainerRequest{{"c", gpu(1, 1000, 1000, 0, 0), Tessera, false}}},
		{"per-container override and untouched sidecar",
			pod(map[string]string{AnnotationCompute: "0.5", AnnotationCompute + ".b": "0.25"},
				ctr{"a", map[string]string{ResourceGPU: "1"}}, ctr{"b", map[string]string{ResourceGPU: "1"}}, ctr{"side", nil}),
			[]ContainerRequest{{"a", gpu(1, 500, 500, 0, 0), Tessera, false}, {"b", gpu(1, 250, 250, 0, 0), Tessera, false}}},
		{"model constraint",
			pod(map[string]string{AnnotationModel: "h100"}, ctr{"c", map[string]string{ResourceGPU: "1"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: []string{"H100-PCIe", "H100-SXM"}}, Tessera, false}}},
		{"plain nvidia.com/gpu", pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "4"}}),
			[]ContainerRequest{{"c", gpu(4, 1000, 1000, 0, 0), NVIDIA, false}}},
		{"KAI fraction on the first container",
			pod(map[string]string{KAIAnnotationFraction: "0.5"}, ctr{"c", nil}, ctr{"d", nil}),
			[]ContainerRequest{{"c", gpu(1, 500, 1000, 0, 0), KAI, false}}},
		{"KAI fraction on the named container",
			pod(map[string]string{KAIAnnotationFraction: "0.5", KAIAnnotationContainerName: "gpu"}, ctr{"sidecar", nil}, ctr{"gpu", nil}),
			[]ContainerRequest{{"gpu", gpu(1, 500, 1000, 0, 0), KAI, false}}},
		{"KAI memory on two devices",
			pod(map[string]string{KAIAnnotationMemory: "2000", KAIAnnotationNumDevices: "2"}, ctr{"c", nil}),
			[]ContainerRequest{{"c", gpu(2, 0, 1000, 2000, 0), KAI, false}}},
		{"HAMi memory and cores",
			pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "3000", HAMiResourceCores: "30"}}),
			[]ContainerRequest{{"c", gpu(1, 300, 300, 3000, 0), HAMi, false}}},
		{"HAMi memory only bursts to the whole GPU",
			pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "3000"}}),
			[]ContainerRequest{{"c", gpu(1, 0, 1000, 3000, 0), HAMi, false}}},
		{"HAMi cores only",
			pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "2", HAMiResourceCores: "50"}}),
			[]ContainerRequest{{"c", gpu(2, 500, 500, 0, 0), HAMi, false}}},
		{"HAMi memory percentage",
			pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemoryPercent: "25"}}),
			[]ContainerRequest{{"c", gpu(1, 250, 1000, 0, 0), HAMi, false}}},
		{"HAMi memory percentage apart from cores",
			pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemoryPercent: "50", HAMiResourceCores: "20"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeMilli: 200, ComputeLimitMilli: 200, MemoryShareMilli: 500}, HAMi, false}}},
		{"HAMi allowed types",
			pod(map[string]string{HAMiAnnotationUseType: "h100,A100"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "3000"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeLimitMilli: 1000, MemoryMiB: 3000, Models: []string{"H100-PCIe", "H100-SXM"}}, HAMi, false}}},
		{"HAMi excluded types on nvidia.com/gpu",
			pod(map[string]string{HAMiAnnotationNoUseType: "H100, H200"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: []string{"L4"}}, NVIDIA, false}}},
		{"HAMi core mode",
			pod(map[string]string{HAMiAnnotationVGPUMode: "hami-core"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceCores: "30"}}),
			[]ContainerRequest{{"c", gpu(1, 300, 300, 0, 0), HAMi, false}}},
		{"Volcano vGPU memory and cores",
			pod(nil, ctr{"c", map[string]string{VolcanoResourceNumber: "2", VolcanoResourceMemory: "4000", VolcanoResourceCores: "40"}}),
			[]ContainerRequest{{"c", gpu(2, 400, 400, 4000, 0), Volcano, false}}},
		{"Volcano vGPU memory only",
			pod(nil, ctr{"side", nil}, ctr{"c", map[string]string{VolcanoResourceNumber: "1", VolcanoResourceMemory: "1024"}}),
			[]ContainerRequest{{"c", gpu(1, 0, 1000, 1024, 0), Volcano, false}}},
		{"Volcano vGPU memory percentage",
			pod(nil, ctr{"c", map[string]string{VolcanoResourceNumber: "1", VolcanoResourceMemoryPercent: "25", VolcanoResourceCores: "50"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryShareMilli: 250}, Volcano, false}}},
		// nvshare's virtual GPU: the whole card's memory and compute as the
		// limit, a tenth guaranteed, on a node that oversubscribes memory;
		// the pod's other GPU containers go there too.
		{"nvshare", pod(nil, ctr{"c", map[string]string{NvshareResourceGPU: "1"}}),
			[]ContainerRequest{{"c", nvshareGPU(), Nvshare, true}}},
		{"nvshare beside a Tessera container",
			pod(nil, ctr{"a", map[string]string{NvshareResourceGPU: "1"}}, ctr{"b", map[string]string{ResourceGPU: "1"}}, ctr{"side", nil}),
			[]ContainerRequest{{"a", nvshareGPU(), Nvshare, true}, {"b", gpu(1, 1000, 1000, 0, 0), Tessera, true}}},
		{"tessera oversubscribed", pod(map[string]string{AnnotationOversubscribe: "true", AnnotationCompute: "0.2", AnnotationMemoryLimit: "100%"}, ctr{"c", map[string]string{ResourceGPU: "1"}}),
			[]ContainerRequest{{"c", request.GPU{Count: 1, ComputeMilli: 200, ComputeLimitMilli: 200, MemoryLimitShareMilli: 1000}, Tessera, true}}},
		{"oversubscription off", pod(map[string]string{AnnotationOversubscribe: "false"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			[]ContainerRequest{{"c", gpu(1, 1000, 1000, 0, 0), NVIDIA, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromPod(tc.pod, cat)
			if err != nil {
				t.Fatalf("FromPod: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("FromPod =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

func TestFromPodErrors(t *testing.T) {
	cat := catalogtest.Small()
	one := ctr{"c", map[string]string{ResourceGPU: "1"}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"fraction 1.5", pod(map[string]string{AnnotationCompute: "1.5"}, one),
			`annotation tessera.io/gpu-fraction of container c: must be a share in (0, 1]`},
		{"limit below request", pod(map[string]string{AnnotationCompute: "0.5", AnnotationComputeLimit: "0.25"}, one),
			`annotation tessera.io/gpu-fraction-limit of container c: must be in [0.5, 1] (at least compute, the guaranteed compute), got "0.25"`},
		{"memory larger than any GPU", pod(map[string]string{AnnotationCompute: "0.5", AnnotationMemory: "1Ti"}, one),
			`annotation tessera.io/gpu-memory of container c: must be in [0, 143771Mi] (the memory of the largest allowed model, H200), got "1Ti"`},
		{"unknown model", pod(map[string]string{AnnotationModel: "H2000"}, one),
			`annotation tessera.io/gpu-model of container c: must be a model from`},
		{"override names its own key", pod(map[string]string{AnnotationCompute + ".c": "2"}, one),
			`annotation tessera.io/gpu-fraction.c of container c: must be a share in (0, 1]`},
		{"bad count", pod(nil, ctr{"c", map[string]string{ResourceGPU: "20"}}),
			`resource tessera.io/gpu of container c: must be a whole number in [1, 16], got 20`},
		{"fractional count", pod(nil, ctr{"c", map[string]string{ResourceGPU: "500m"}}),
			`resource tessera.io/gpu of container c: must be a whole number in [1, 16], got 500m`},
		{"tessera and nvidia together", pod(nil, ctr{"c", map[string]string{ResourceGPU: "1", ResourceNVIDIAGPU: "1"}}),
			`resource tessera.io/gpu of container c: conflicts with nvidia.com/gpu`},
		{"tessera annotation on nvidia.com/gpu", pod(map[string]string{AnnotationCompute: "0.5"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			`annotation tessera.io/gpu-fraction of container c: conflicts with resource nvidia.com/gpu`},
		{"gpu-milli not the share", pod(map[string]string{AnnotationCompute: "0.25"}, ctr{"c", map[string]string{ResourceGPU: "1", ResourceGPUMilli: "1000"}}),
			`resource tessera.io/gpu-milli of container c: must equal the thousandths of GPU compute the container asks, 250 (1 GPUs x 250), got 1k`},
		{"gpu-milli without tessera.io/gpu", pod(nil, ctr{"c", map[string]string{ResourceGPUMilli: "250"}}),
			`resource tessera.io/gpu-milli of container c: counts the share of the container's tessera.io/gpu for quotas: add resources.limits[tessera.io/gpu]`},
		{"gpu-milli beside nvidia.com/gpu", pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", ResourceGPUMilli: "1000"}}),
			`resource tessera.io/gpu-milli of container c: counts the share of tessera.io/gpu for quotas: write the container's GPUs as tessera.io/gpu`},
		{"gpu-milli of a share in proportion to memory", pod(map[string]string{AnnotationMemory: "20Gi"}, ctr{"c", map[string]string{ResourceGPU: "1", ResourceGPUMilli: "250"}}),
			`resource tessera.io/gpu-milli of container c: needs a compute share fixed before placement`},
		{"annotation without resource", pod(map[string]string{AnnotationCompute: "0.5"}, ctr{"c", nil}),
			`annotation tessera.io/gpu-fraction: set, but no container requests tessera.io/gpu`},
		{"KAI with resources", pod(map[string]string{KAIAnnotationFraction: "0.5"}, one),
			`annotation gpu-fraction of container c: conflicts with resource tessera.io/gpu`},
		{"KAI both fraction and memory", pod(map[string]string{KAIAnnotationFraction: "0.5", KAIAnnotationMemory: "100"}, ctr{"c", nil}),
			`annotation gpu-memory: conflicts with gpu-fraction`},
		{"KAI memory with unit", pod(map[string]string{KAIAnnotationMemory: "2Gi"}, ctr{"c", nil}),
			`annotation gpu-memory: must be a whole number of MiB >= 1 (e.g. 2000), got "2Gi"`},
		{"KAI fraction out of range", pod(map[string]string{KAIAnnotationFraction: "1.2"}, ctr{"c", nil}),
			`annotation gpu-fraction of container c: must be a share in (0, 1]`},
		{"KAI num devices alone", pod(map[string]string{KAIAnnotationNumDevices: "2"}, ctr{"c", nil}),
			`annotation gpu-fraction-num-devices: needs gpu-fraction or gpu-memory`},
		{"HAMi without count", pod(nil, ctr{"c", map[string]string{HAMiResourceMemory: "3000"}}),
			`resource nvidia.com/gpumem of container c: needs nvidia.com/gpu in the same container`},
		{"HAMi cores 150", pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceCores: "150"}}),
			`resource nvidia.com/gpucores of container c: must be a whole percentage in [1, 100], got 150`},
		{"HAMi memory and percentage", pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "10", HAMiResourceMemoryPercent: "10"}}),
			`resource nvidia.com/gpumem-percentage of container c: conflicts with nvidia.com/gpumem`},
		{"HAMi memory too large", pod(nil, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "999999"}}),
			`resource nvidia.com/gpumem of container c: must be in [0, 143771Mi]`},
		{"KAI container name without a request", pod(map[string]string{KAIAnnotationContainerName: "c"}, ctr{"c", nil}),
			`annotation gpu-fraction-container-name: needs gpu-fraction or gpu-memory`},
		{"KAI container name unknown", pod(map[string]string{KAIAnnotationFraction: "0.5", KAIAnnotationContainerName: "gpu"}, ctr{"a", nil}, ctr{"b", nil}),
			`annotation gpu-fraction-container-name: must name one of the pod's containers (a, b), got "gpu"`},
		{"HAMi UUID pinning", pod(map[string]string{HAMiAnnotationUseUUID: "GPU-AAA"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			`annotation nvidia.com/use-gpuuuid: Tessera does not pin pods to (or away from) GPU UUIDs`},
		{"HAMi MIG mode with gpucores", pod(map[string]string{HAMiAnnotationVGPUMode: "mig"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1", HAMiResourceMemory: "10000", HAMiResourceCores: "30"}}),
			`resource nvidia.com/gpucores of container c: cannot be honoured with annotation nvidia.com/vgpu-mode "mig": a MIG instance fixes its own compute and memory`},
		{"HAMi MPS mode", pod(map[string]string{HAMiAnnotationVGPUMode: "mps"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			`annotation nvidia.com/vgpu-mode: "mps": in Tessera MPS is a node's sharing mode`},
		{"HAMi unknown type", pod(map[string]string{HAMiAnnotationUseType: "1080"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			`annotation nvidia.com/use-gputype: "1080" matches no GPU model Tessera knows`},
		{"HAMi types exclude everything", pod(map[string]string{HAMiAnnotationUseType: "H100", HAMiAnnotationNoUseType: "h1"}, ctr{"c", map[string]string{ResourceNVIDIAGPU: "1"}}),
			`annotation nvidia.com/nouse-gputype: "h1" excludes every GPU model that is left`},
		{"HAMi types on tessera.io/gpu", pod(map[string]string{HAMiAnnotationUseType: "H100"}, one),
			`annotation nvidia.com/use-gputype of container c: conflicts with resource tessera.io/gpu: write the models as annotation tessera.io/gpu-model instead`},
		{"HAMi types without GPUs", pod(map[string]string{HAMiAnnotationUseType: "H100"}, ctr{"c", nil}),
			`annotation nvidia.com/use-gputype: set, but no container requests a GPU`},
		{"Volcano without a number", pod(nil, ctr{"c", map[string]string{VolcanoResourceMemory: "1000"}}),
			`resource volcano.sh/vgpu-memory of container c: needs volcano.sh/vgpu-number in the same container`},
		{"Volcano mixed with nvidia.com/gpu", pod(nil, ctr{"c", map[string]string{VolcanoResourceNumber: "1", ResourceNVIDIAGPU: "1"}}),
			`resource volcano.sh/vgpu-number of container c: conflicts with the container's other GPU resources`},
		{"Volcano cores 0", pod(nil, ctr{"c", map[string]string{VolcanoResourceNumber: "1", VolcanoResourceCores: "0"}}),
			`resource volcano.sh/vgpu-cores of container c: must be a whole percentage in [1, 100], got 0`},
		{"nvshare, two", pod(nil, ctr{"c", map[string]string{NvshareResourceGPU: "2"}}),
			`resource nvshare.com/gpu of container c: must be 1, got 2: nvshare hands a container the node's one GPU whatever the count; write 1, or resources.limits[tessera.io/gpu]: N for N GPUs`},
		{"nvshare beside nvidia.com/gpu", pod(nil, ctr{"c", map[string]string{NvshareResourceGPU: "1", ResourceNVIDIAGPU: "1"}}),
			`resource nvshare.com/gpu of container c: conflicts with the container's other GPU resources`},
		{"nvshare with a Tessera annotation", pod(map[string]string{AnnotationCompute: "0.5"}, ctr{"c", map[string]string{NvshareResourceGPU: "1"}}),
			`annotation tessera.io/gpu-fraction of container c: conflicts with resource nvshare.com/gpu`},
		{"nvshare without oversubscription", pod(map[string]string{AnnotationOversubscribe: "false"}, ctr{"c", map[string]string{NvshareResourceGPU: "1"}}),
			`annotation tessera.io/oversubscribe: "false" conflicts with resource nvshare.com/gpu of container c, which needs a node that oversubscribes GPU memory; remove the annotation`},
		{"oversubscribe yes", pod(map[string]string{AnnotationOversubscribe: "yes"}, one),
			`annotation tessera.io/oversubscribe: must be "true" (only nodes whose agent runs with --oversubscribe) or "false", got "yes"`},
		{"oversubscribe without GPUs", pod(map[string]string{AnnotationOversubscribe: "true"}, ctr{"c", nil}),
			`annotation tessera.io/oversubscribe: set, but no container requests a GPU`},
	}
	for _, tc := range tests {
		_, err := FromPod(tc.pod, cat)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.name, err, tc.want)
		}
	}
	// Init containers may not ask for GPUs.
	p := pod(nil, ctr{"c", nil})
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceNVIDIAGPU: resource.MustParse("1")}}}}
	if _, err := FromPod(p, cat); err == nil || !strings.Contains(err.Error(), "resource nvidia.com/gpu of container init: GPUs for init containers are not supported") {
		t.Errorf("init container: %v", err)
	}
	// KAI may name an init container; Tessera refuses it with the reason.
	p = pod(map[string]string{KAIAnnotationFraction: "0.5", KAIAnnotationContainerName: "init"}, ctr{"c", nil})
	p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	if _, err := FromPod(p, cat); err == nil || !strings.Contains(err.Error(), "annotation gpu-fraction-container-name: names init container init: Tessera gives GPUs to regular containers only") {
		t.Errorf("KAI init container: %v", err)
	}
}
