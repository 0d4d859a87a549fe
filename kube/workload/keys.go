package workload

import "github.com/tessera-gpu/tessera/request"

// Tessera's own keys.
const (
	// ResourceGPU is the extended resource counted by kubelet and quotas:
	// the number of GPUs (whole, or shared with a fraction) a container uses.
	ResourceGPU = "tessera.io/gpu"

	// ResourceGPUMilli is an accounting resource for quota systems that
	// count requests (Kueue): the thousandths of GPU compute a container is
	// guaranteed, over all its GPUs (tessera.io/gpu: 1 with a fraction of
	// 0.25 is 250). Optional; when present it must equal that share. No
	// device plugin serves it and no node advertises it: kubelet's
	// admission leaves out an extended resource its node does not
	// advertise, and Tessera hides it from kube-scheduler's plugins.
	ResourceGPUMilli = "tessera.io/gpu-milli"

	// Annotation keys. Each applies to every container that asks for GPUs;
	// KEY.<container> overrides it for one container.
	AnnotationCompute      = "tessera.io/gpu-fraction"
	AnnotationComputeLimit = "tessera.io/gpu-fraction-limit"
	AnnotationMemory       = "tessera.io/gpu-memory"
	AnnotationMemoryLimit  = "tessera.io/gpu-memory-limit"
	AnnotationExclusive    = "tessera.io/gpu-exclusive"
	AnnotationMIGProfile   = "tessera.io/mig-profile"
	AnnotationModel        = "tessera.io/gpu-model"

	// AnnotationOversubscribe, "true" or "false" (the default), places the
	// pod only on nodes whose agent oversubscribes GPU memory (tessera
	// agent --oversubscribe, published as the GPUNode's
	// status.memoryOversubscription): device allocations become managed
	// memory, so memory limits may add up past a GPU's memory. It is
	// pod-wide; nvshare.com/gpu implies it.
	AnnotationOversubscribe = "tessera.io/oversubscribe"

	// AnnotationPolicy names the placement policy for one pod (default: the
	// scheduler's --policy); see placement.Canonical for the allowed values
	// ("default" among them).
	AnnotationPolicy = "tessera.io/placement-policy"
)

// Keys of other systems accepted for migration.
const (
	ResourceNVIDIAGPU = "nvidia.com/gpu"

	// KAI-Scheduler: pod annotations; gpu-memory is in MiB.
	KAIAnnotationFraction   = "gpu-fraction"
	KAIAnnotationMemory     = "gpu-memory"
	KAIAnnotationNumDevices = "gpu-fraction-num-devices"

	// HAMi: container resources; gpumem in MiB, percentages 1..100.
	HAMiResourceMemory        = "nvidia.com/gpumem"
	HAMiResourceMemoryPercent = "nvidia.com/gpumem-percentage"
	HAMiResourceCores         = "nvidia.com/gpucores"
)

// More keys of other systems, each translated exactly or refused with what
// to write instead (kube/admission's table lists every one).
const (
	// KAI-Scheduler: the container that gets the fraction (default: the
	// pod's first), the queue label and the gang minimum (on the Job).
	KAIAnnotationContainerName = "gpu-fraction-container-name"
	KAILabelQueue              = "kai.scheduler/queue"
	KAIAnnotationMinMember     = "kai.scheduler/batch-min-member"
	// HAMi: pod annotations. use/nouse-gputype are comma-separated model
	// names matched as substrings of the device name; the policies are
	// "binpack" or "spread".
	HAMiAnnotationUseType    = "nvidia.com/use-gputype"
	HAMiAnnotationNoUseType  = "nvidia.com/nouse-gputype"
	HAMiAnnotationUseUUID    = "nvidia.com/use-gpuuuid"
	HAMiAnnotationNoUseUUID  = "nvidia.com/nouse-gpuuuid"
	HAMiAnnotationVGPUMode   = "nvidia.com/vgpu-mode"
	HAMiAnnotationNodePolicy = "hami.io/node-scheduler-policy"
	HAMiAnnotationGPUPolicy  = "hami.io/gpu-scheduler-policy"
	// Volcano's vGPU device plugin (HAMi's, renamed): container resources.
	VolcanoResourceNumber        = "volcano.sh/vgpu-number"
	VolcanoResourceMemory        = "volcano.sh/vgpu-memory"
	VolcanoResourceMemoryPercent = "volcano.sh/vgpu-memory-percentage"
	VolcanoResourceCores         = "volcano.sh/vgpu-cores"
	// VolcanoAnnotationGroupName names the pod's Volcano PodGroup
	// (scheduling.volcano.sh), as Volcano's Job controller writes it.
	VolcanoAnnotationGroupName = "scheduling.k8s.io/group-name"
	// SchedulerPluginsLabelPodGroup names the pod's PodGroup of
	// scheduler-plugins' coscheduling (scheduling.x-k8s.io), as Kubeflow's
	// training operator and JobSet write it.
	SchedulerPluginsLabelPodGroup = "scheduling.x-k8s.io/pod-group"
	// nvshare: one virtual GPU with the whole card's memory, through
	// managed memory (NvshareFields, AnnotationOversubscribe).
	NvshareResourceGPU = "nvshare.com/gpu"
)

// annotationField maps Tessera annotations to request fields.
func annotationFields() []struct{ key, field string } {
	return []struct{ key, field string }{
		{AnnotationCompute, request.FieldCompute},
		{AnnotationComputeLimit, request.FieldComputeLimit},
		{AnnotationMemory, request.FieldMemory},
		{AnnotationMemoryLimit, request.FieldMemoryLimit},
		{AnnotationExclusive, request.FieldExclusive},
		{AnnotationMIGProfile, request.FieldMIGProfile},
		{AnnotationModel, request.FieldModel},
	}
}
