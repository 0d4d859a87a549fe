package scheduler

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// podWork is a pending pod in the scheduling cycle's terms.
type podWork struct {
	w cycle.Workload
	// reqs are the parts' requests, in the same order: the GPU containers'
	// (one empty request for a pod with no GPU container and no claim
	// part), then the claims' (Container "").
	reqs []workload.ContainerRequest
	// claims are the pod's DRA claims; nil when it has none.
	claims *draclaims.PodClaims
}

// podWorkOf translates a pending pod into the scheduling cycle's terms:
// its GPU containers as engine parts in container order, then the
// requests of its DRA claims to allocate (kube/draclaims); the first part
// also carries the pod's host CPU and memory, and a pod with no such part
// is one host-only part. Also its policy, queue, priority and gang, and
// the nodes of snap its constraints, its claims and the nodes' sharing
// modes rule out, with why. A draclaims.Wait error says the pod waits for
// a claim.
func (s *Scheduler) podWorkOf(snap *snapshot, pod *corev1.Pod) (podWork, error) {
	reqs, err := workload.FromPod(pod, s.cfg.Catalog)
	if err != nil {
		return podWork{}, err
	}
	// Queue and gang keys the webhook refuses: a pod that reached the
	// scheduler unrewritten is refused alike, not read half-way.
	if err := workload.CheckGangKeys(pod); err != nil {
		return podWork{}, err
	}
	pol, err := s.policyFor(pod)
	if err != nil {
		return podWork{}, err
	}
	claims, err := s.dra.PodClaims(pod)
	if err != nil {
		return podWork{}, err
	}
	name := pod.Namespace + "/" + pod.Name
	parts := make([]placement.Pod, len(reqs))
	for i, r := range reqs {
		parts[i] = placement.Pod{Name: name, GPU: r.GPU}
		if r.Container != "" {
			parts[i].Name = name + "/" + r.Container
		}
	}
	if claims != nil {
		parts, reqs = claims.AppendParts(name, parts, reqs)
	}
	gpuReqs := reqs
	if len(reqs) == 0 {
		reqs = []workload.ContainerRequest{{}}
		parts = []placement.Pod{{Name: name}}
	}
	cpu, mem := podHostRequests(pod)
	parts[0].CPUMilli, parts[0].MemoryMiB = cpu, mem
	gpus, needs := sharingNeeds(gpuReqs, pod.Spec.HostIPC)
	// The nodes that take nothing (not Ready, unschedulable) are closed in
	// the engine's cluster. A pod that no node's taints, the pod's own node
	// constraints, its claims or any node's sharing rule out needs no check
	// per node: the policy then places it on the cluster itself, by class.
	var exclude func(int) string
	if snap.tainted > 0 || claims != nil || hasNodeConstraints(pod) || slices.ContainsFunc(snap.sharings, func(ns placement.NodeSharing) bool {
		return sharingRule(gpus, needs, ns) != ""
	}) {
		aff := nodeaffinity.GetRequiredNodeAffinity(pod)
		exclude = func(i int) string {
			if why := admits(pod, aff, snap.nodes[i]); why != "" {
				return why
			}
			if claims != nil {
				if why := claims.Excludes(snap.nodes[i]); why != "" {
					return why
				}
			}
			return sharingRule(gpus, needs, snap.sharing[i])
		}
	}
	return podWork{w: cycle.Workload{
		ID: name, Queue: s.members.Queue(pod), Priority: priority(pod), Gang: s.members.Gang(pod),
		Parts: parts, Policy: pol, Exclude: exclude,
	}, reqs: reqs, claims: claims}, nil
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
