// Package admission is Tessera's mutating admission webhook. It makes pods
// that ask for GPUs only through annotations (KAI-Scheduler's gpu-fraction,
// gpu-memory and gpu-fraction-num-devices) request the tessera.io/gpu
// extended resource, so that kubelet calls the node agent's device plugin
// for them and they get their handoff (visible devices, limits).
//
// For a pod of the Tessera scheduler whose request uses those annotations,
// the webhook adds tessera.io/gpu (one unit per GPU, as the agent counts) to
// the container the annotations apply to and rewrites the annotations into
// Tessera's own keys, which kube/workload reads as exactly the same request.
// Pods that ask for nothing, that already carry a GPU resource, or that
// belong to another scheduler are allowed untouched. A pod whose request is
// invalid is denied with kube/workload's message (the pod's key, the
// container and the allowed range).
//
// It only translates requests through kube/workload: it must not schedule,
// call the API server, or hold state beyond its configuration; a request's
// meaning stays defined by kube/workload and the request package.
package admission
