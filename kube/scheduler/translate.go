package scheduler

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// workloadOf translates a pending pod into the scheduling cycle's terms:
// its GPU containers as engine parts in container order (the first also
// carries the pod's host CPU and memory; a pod without GPU containers is
// one host-only part), its policy, queue, priority and gang, and the nodes
// of snap its constraints and the nodes' sharing modes rule out, with why.
// reqs are the parts' container requests, in the same order (one empty
// request for a host-only pod).
func (s *Scheduler) workloadOf(snap *snapshot, pod *corev1.Pod) (w cycle.Workload, reqs []workload.ContainerRequest, err error) {
	reqs, err = workload.FromPod(pod, s.cfg.Catalog)
	if err != nil {
		return cycle.Workload{}, nil, err
	}
	// A pod with DRA claims would be bound with its claims unallocated,
	// and kubelet would wait for them for ever: say so instead.
	if len(pod.Spec.ResourceClaims) > 0 {
		return cycle.Workload{}, nil, fmt.Errorf("spec.resourceClaims[0] (%s): this scheduler does not allocate DRA ResourceClaims yet; leave schedulerName unset so that kube-scheduler allocates them (docs/api.md, \"The same share as a DRA claim\")", pod.Spec.ResourceClaims[0].Name)
	}
	// Queue and gang keys the webhook refuses: a pod that reached the
	// scheduler unrewritten is refused alike, not read half-way.
	if err := workload.CheckGangKeys(pod); err != nil {
		return cycle.Workload{}, nil, err
	}
	pol, err := s.policyFor(pod)
	if err != nil {
		return cycle.Workload{}, nil, err
	}
	name := pod.Namespace + "/" + pod.Name
	gpuReqs := reqs
	if len(reqs) == 0 {
		reqs = []workload.ContainerRequest{{}}
	}
	cpu, mem := podHostRequests(pod)
	parts := make([]placement.Pod, len(reqs))
	for i, r := range reqs {
		parts[i] = placement.Pod{Name: name, GPU: r.GPU}
		if r.Container != "" {
			parts[i].Name = name + "/" + r.Container
		}
	}
	parts[0].CPUMilli, parts[0].MemoryMiB = cpu, mem
	gpus, needs := sharingNeeds(gpuReqs, pod.Spec.HostIPC)
	// The nodes that take nothing (not Ready, unschedulable) are closed in
	// the engine's cluster. A pod that no node's taints, the pod's own node
	// constraints or any node's sharing rule out needs no check per node:
	// the policy then places it on the cluster itself, by class.
	var exclude func(int) string
	if snap.tainted > 0 || hasNodeConstraints(pod) || slices.ContainsFunc(snap.sharings, func(ns placement.NodeSharing) bool {
		return sharingRule(gpus, needs, ns) != ""
	}) {
		aff := nodeaffinity.GetRequiredNodeAffinity(pod)
		exclude = func(i int) string {
			if why := admits(pod, aff, snap.nodes[i]); why != "" {
				return why
			}
			return sharingRule(gpus, needs, snap.sharing[i])
		}
	}
	return cycle.Workload{
		ID: name, Queue: s.queueOf(pod), Priority: priority(pod), Gang: s.groupKey(pod),
		Parts: parts, Policy: pol, Exclude: exclude,
	}, reqs, nil
}

// hasNodeConstraints reports whether pod names nodes by their labels or
// fields (spec.nodeSelector, required node affinity).
func hasNodeConstraints(pod *corev1.Pod) bool {
	if len(pod.Spec.NodeSelector) > 0 {
		return true
	}
	a := pod.Spec.Affinity
	return a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
}

// workloadsOf is workloadOf for several pods, in order.
func (s *Scheduler) workloadsOf(snap *snapshot, pods []*corev1.Pod) ([]cycle.Workload, error) {
	out := make([]cycle.Workload, 0, len(pods))
	for _, p := range pods {
		w, _, err := s.workloadOf(snap, p)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		out = append(out, w)
	}
	return out, nil
}
