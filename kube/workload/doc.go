// Package workload reads what a Kubernetes pod asks of GPUs and turns it into
// Tessera requests (request.GPU), one per container. It accepts Tessera's own
// keys (the tessera.io/gpu resource and tessera.io/ annotations; the
// tessera.io/gpu-milli resource, which counts the share for quota systems
// such as Kueue, is checked against them) and, so that
// users can switch by changing only schedulerName, the keys of other GPU
// sharing systems: plain nvidia.com/gpu; KAI-Scheduler's gpu-fraction,
// gpu-memory, gpu-fraction-num-devices and gpu-fraction-container-name
// annotations; HAMi's nvidia.com/gpumem, gpumem-percentage and gpucores
// resources with its use-gputype/nouse-gputype, vgpu-mode and scheduler
// policy annotations (PlacementPolicy; vgpu-mode "mig" asks, per GPU, the
// smallest MIG profile holding gpumem, on the models where it is the
// smallest: a request names one profile); Volcano's volcano.sh/vgpu-*
// resources; nvshare's nvshare.com/gpu (a tenth of a GPU guaranteed, the
// whole GPU as the limit, on nodes that oversubscribe memory). Keys
// without an exact equivalent (HAMi's UUID pinning, vgpu-mode mps)
// are refused with what to write instead; kube/admission's table lists
// every key. SharingRule words the engine's sharing-mode verdict
// (placement.SharingFit) on a node in the pod's own keys.
//
// Errors name the pod's own key (annotation or resource) and the allowed
// range. The package only translates: it must not schedule, talk to the API
// server or record decisions.
package workload
