// Package admission is Tessera's mutating admission webhook. It rewrites
// pods of the Tessera scheduler that ask for GPUs in another system's terms
// into Tessera's own, so that kubelet calls the node agent's device plugin
// for them and they get their handoff (visible devices, limits). Table
// lists every key of another system (KAI-Scheduler, NVIDIA's device plugin,
// HAMi, Volcano, nvshare) with its meaning there, its Tessera equivalent or
// its refusal, and its test; MatchExpression is the CEL that selects the
// pods carrying them. In short:
//
//   - KAI-Scheduler's gpu-fraction, gpu-memory and gpu-fraction-num-devices
//     annotations (no extended resource at all, so kubelet would never call
//     any plugin): the pod's first container (or the one
//     gpu-fraction-container-name names) gets tessera.io/gpu and the
//     annotations become Tessera's keys;
//   - the nvidia.com/gpu resource, HAMi's nvidia.com/gpumem,
//     gpumem-percentage and gpucores resources and Volcano's
//     volcano.sh/vgpu-* resources (which kubelet would hand to another
//     device plugin, not to Tessera's agent): each such container gets
//     tessera.io/gpu instead, in its limits and requests, and the values
//     become Tessera annotations for that container (KEY.<container>);
//   - nvshare's nvshare.com/gpu: 1: the container gets tessera.io/gpu: 1
//     with a tenth of the GPU guaranteed, the whole GPU as the compute and
//     memory limit, and the pod tessera.io/oversubscribe: "true" (only nodes
//     whose agent oversubscribes memory);
//   - HAMi's use-gputype/nouse-gputype become tessera.io/gpu-model, its node
//     and GPU scheduler policies tessera.io/placement-policy, vgpu-mode
//     hami-core is dropped and vgpu-mode mig becomes each container's
//     tessera.io/mig-profile and tessera.io/gpu-model (kube/workload picks
//     the smallest profile holding gpumem);
//   - the queue and gang keys (kai.scheduler/queue,
//     kai.scheduler/batch-min-member, Volcano's scheduling.k8s.io/group-name)
//     stay for the scheduler to read; the webhook refuses the ones it could
//     not read as written (workload.CheckGangKeys, which the scheduler
//     applies too).
//
// tessera.io/gpu counts one unit per GPU, as the agent does. What was
// replaced is recorded in the tessera.io/migrated-from annotation, and
// before answering the webhook checks that kube/workload reads the patched
// pod as exactly the same request per container; it denies the pod
// otherwise. Pods that ask for nothing, that ask through tessera.io/gpu
// with their gpu-milli already, or that belong to another scheduler are
// allowed untouched. A pod whose request is invalid, or that mixes
// conventions in a way kube/workload rejects, is denied with
// kube/workload's message (the pod's key, the container and the allowed
// range).
//
// Each container whose compute share is fixed before placement also gets
// tessera.io/gpu-milli (limits and requests: the share in thousandths over
// all its GPUs), in Tessera's pods too, so that a quota counts a 0.25
// share as 250: a namespace's ResourceQuota and Kueue's pod integration
// count pods on creation. A batch/v1 Job's pod template (the kind Kueue
// counts when the Job is created, before any pod exists) gets the same
// patch on creation; JobMatchExpression selects those Jobs. So do a
// JobSet's replicated Jobs' templates (Kueue's JobSet integration counts
// them; JobSetMatchExpressions selects those JobSets). A wrong gpu-milli
// is denied; the Jobs and pods made from a patched template are left
// alone. Templates of other kinds (RayJob) are not patched.
//
// It only translates requests through kube/workload: it must not schedule,
// call the API server, or hold state beyond its configuration; a request's
// meaning stays defined by kube/workload and the request package.
package admission
