package workload

import "github.com/tessera-gpu/tessera/request"

// Tessera's own keys.
const (
	// ResourceGPU is the extended resource counted by kubelet and quotas:
	// the number of GPUs (whole, or shared with a fraction) a container uses.
	ResourceGPU = "tessera.io/gpu"

	// Annotation keys. Each applies to every container that asks for GPUs;
	// KEY.<container> overrides it for one container.
	AnnotationCompute      = "tessera.io/gpu-fraction"
	AnnotationComputeLimit = "tessera.io/gpu-fraction-limit"
	AnnotationMemory       = "tessera.io/gpu-memory"
	AnnotationMemoryLimit  = "tessera.io/gpu-memory-limit"
	AnnotationExclusive    = "tessera.io/gpu-exclusive"
	AnnotationMIGProfile   = "tessera.io/mig-profile"
	AnnotationModel        = "tessera.io/gpu-model"

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
