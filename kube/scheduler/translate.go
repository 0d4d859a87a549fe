package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/component-helpers/node/util"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/kube/kubefilter"
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
	// filtered: kube-scheduler's plugins concern the pod (kube/kubefilter).
	filtered bool
}

// translate is the core's Frame.Translate: a pending pod as a cycle
// workload, with a planner as its Reserver.
func (cw *cycleWork) translate(id string) (cycle.Workload, error) {
	p, ok := cw.pods[id]
	if !ok {
		return cycle.Workload{}, fmt.Errorf("pod %s is not pending", id)
	}
	pw, err := cw.s.podWorkOf(cw.ctx, cw.snap, p)
	if err != nil {
		if errors.As(err, new(draclaims.Wait)) {
			return cycle.Workload{}, dispatch.Unready{Reason: err.Error()}
		}
		return cycle.Workload{}, err
	}
	pw.w.Reserver = (*planner)(cw)
	cw.work[id] = pw
	return pw.w, nil
}

// gang is the core's Frame.Gang: as a pending member defines it, or a
// running one (the core keeps a running gang at its minimum).
func (cw *cycleWork) gang(key string) dispatch.GangSpec {
	if g, ok := cw.gangs[key]; ok {
		return g
	}
	if id, ok := cw.snap.books.GangMember(key); ok && cw.snap.pods[id] != nil {
		n, err := cw.s.members.MinMember(cw.snap.pods[id])
		return dispatch.GangSpec{Min: n, Err: err}
	}
	return dispatch.GangSpec{Err: fmt.Errorf("gang %s: no member's definition was read", key)}
}

// arrival is the core's Frame.Arrival: what a pod that arrived teaches
// the policies that learn: one part per GPU container (one host-only part
// for a pod with none), the first with the pod's CPU and memory, and its
// own policy. An invalid pod is no arrival: it is never placed.
func (cw *cycleWork) arrival(id string) (placement.Policy, []placement.Pod, bool) {
	pod, ok := cw.pods[id]
	if !ok {
		return nil, nil, false
	}
	reqs, err := workload.FromPod(pod, cw.s.cfg.Catalog)
	if err != nil {
		return nil, nil, false
	}
	if len(reqs) == 0 {
		reqs = []workload.ContainerRequest{{}}
	}
	parts := make([]placement.Pod, len(reqs))
	for i, r := range reqs {
		parts[i] = placement.Pod{Name: id + "/" + r.Container, GPU: r.GPU}
	}
	parts[0].CPUMilli, parts[0].MemoryMiB = boundpods.HostRequests(pod)
	own, _ := cw.s.policyFor(pod) // a pod naming no valid policy teaches the scheduler's alone
	return own, parts, true
}

// podWorkOf translates a pending pod into the scheduling cycle's terms:
// its GPU containers as engine parts in container order, then the
// requests of its DRA claims to allocate (kube/draclaims); the first part
// also carries the pod's host CPU and memory, and a pod with no such part
// is one host-only part. Also its policy, queue, priority and gang, and
// the nodes of snap its constraints, its claims and the nodes' sharing
// modes rule out, then those kube-scheduler's plugins rule out for a pod
// they concern, with why. A draclaims.Wait error says the pod waits for
// a claim.
func (s *Scheduler) podWorkOf(ctx context.Context, snap *snapshot, pod *corev1.Pod) (podWork, error) {
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
	cpu, mem := boundpods.HostRequests(pod)
	parts[0].CPUMilli, parts[0].MemoryMiB, parts[0].Slot = cpu, mem, true
	if tolerateCordon(pod) {
		for i := range parts {
			parts[i].OpensCordoned = true
		}
	}
	gpus, needs := workload.SharingNeeds(gpuReqs, pod.Spec.HostIPC)
	// The nodes that take nothing (not Ready, unschedulable) are closed in
	// the engine's cluster (a cordoned one, placement.ClosedCordoned, to a
	// pod tolerating the cordon too). A pod that no node's taints, the pod's own node
	// constraints, its claims or any node's sharing rule out needs no check
	// per node: the policy then places it on the cluster itself, by class.
	var exclude func(int) string
	if snap.tainted > 0 || claims != nil || hasNodeConstraints(pod) || slices.ContainsFunc(snap.sharings, func(ns placement.NodeSharing) bool {
		return workload.SharingRule(gpus, needs, ns) != ""
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
			return workload.SharingRule(gpus, needs, snap.sharing[i])
		}
	}
	// The plugins run only on the nodes whose GPUs and host resources
	// could take the pod now; a node that frees room later in the cycle
	// (a gang's step given back) or by preemption is checked when it is
	// picked (the planner's Reserve, FitsWithout).
	candidate := func(i int) bool { return placement.Fits(&snap.cluster.Nodes[i], &parts[0]) }
	exclude, preemptExclude, filtered, err := s.filter.Exclude(ctx, pod, snap.nodes, exclude, candidate)
	if err != nil {
		return podWork{}, schedulerError{err}
	}
	if kubefilter.Prefers(pod) {
		// Soft constraints settle the nodes the policy rates alike, as
		// kube-scheduler's score plugins rate them when it decides.
		parts[0].Prefer = func(c *placement.Cluster) ([]int64, error) {
			names := make([]string, len(c.Nodes))
			for i := range c.Nodes {
				names[i] = c.Nodes[i].Name
			}
			return s.filter.Scores(ctx, pod, names)
		}
	}
	return podWork{w: cycle.Workload{
		ID: name, Queue: s.members.Queue(pod), Priority: priority(pod), Gang: s.members.Gang(pod),
		Parts: parts, Policy: pol, Exclude: exclude, PreemptExclude: preemptExclude,
	}, reqs: reqs, claims: claims, filtered: filtered}, nil
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

// policyFor returns the placement policy for a pod: the one its
// tessera.io/placement-policy annotation (or HAMi's scheduler policies, as
// kube/workload translates them) names, else the scheduler's. Each
// named policy is built once and kept, so the policies that learn the
// workload from arrivals learn from the pods that use them.
func (s *Scheduler) policyFor(pod *corev1.Pod) (placement.Policy, error) {
	name, from, ok, err := workload.PlacementPolicy(pod)
	if err != nil {
		return nil, err
	}
	if !ok {
		return s.policy, nil
	}
	key, err := placement.Canonical(name) // "default" and "tessera" are one policy
	if err != nil {
		return nil, fmt.Errorf("annotation %s: must be one of %s, got %q", from, strings.Join(placement.Names(), ", "), name)
	}
	if p, ok := s.podPolicies[key]; ok {
		return p, nil
	}
	p, err := placement.New(key, placement.Options{Seed: s.cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", from, err)
	}
	s.podPolicies[key] = p
	return p, nil
}

// usable and admits apply the standard pod constraints that do not depend
// on resources: usable the node's own (readiness and schedulability, the
// same for every pod, so read once per snapshot), admits the pod's against
// the node (taints with effect NoSchedule or NoExecute against the pod's
// tolerations, and nodeSelector plus required node affinity). Each
// returns "" or the reason the node is ruled out.
func usable(n *corev1.Node) string {
	if !ready(n) {
		return "node is not Ready"
	}
	if n.Spec.Unschedulable {
		return placement.ClosedCordoned // a pod tolerating the cordon may use it (tolerateCordon)
	}
	return ""
}

// tolerateCordon reports whether pod tolerates a cordon, as
// kube-scheduler's NodeUnschedulable plugin asks: the taint
// node.kubernetes.io/unschedulable:NoSchedule (DaemonSet pods carry that
// toleration).
func tolerateCordon(pod *corev1.Pod) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &corev1.Taint{
		Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false)
}

// tainted is 1 when n has a taint that keeps pods off (NoSchedule or
// NoExecute), else 0.
func tainted(n *corev1.Node) int {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return 1
		}
	}
	return 0
}

// admits says why n's taints or the pod's required node affinity keep the
// pod off n ("" when they do not), through component-helpers, the library
// TaintToleration and NodeAffinity themselves call. The plugins run only
// on the candidate nodes (room now); this check runs on every node, so a
// node the pod may never use is neither a place nor a preemption target.
func admits(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, noSchedule, false); bad {
		return "untolerated taint " + t.Key
	}
	if ok, _ := affinity.Match(n); !ok {
		return "node selector or affinity does not match"
	}
	return ""
}

func ready(n *corev1.Node) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}
