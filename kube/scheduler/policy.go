package scheduler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

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

// observeArrivals tells the policies that learn the workload online
// (placement.Observer) of each pending pod the first time it is seen, one
// arrival per GPU container (one host-only arrival for a CPU-only pod), as
// decide asks the engine to place them: the scheduler's policy and, when
// the pod names another, that one too. Pods no longer listed (seen) are
// forgotten.
func (s *Scheduler) observeArrivals(pending []*corev1.Pod) {
	for _, pod := range pending {
		if s.arrived[pod.UID] {
			continue
		}
		s.arrived[pod.UID] = true
		reqs, err := workload.FromPod(pod, s.cfg.Catalog)
		if err != nil {
			continue // invalid: it is never placed, so it is no arrival
		}
		if len(reqs) == 0 {
			reqs = []workload.ContainerRequest{{}}
		}
		pols := []placement.Policy{s.policy}
		if own, err := s.policyFor(pod); err == nil && own != s.policy {
			pols = append(pols, own)
		}
		cpu, mem := podHostRequests(pod)
		for _, pol := range pols {
			obs, ok := pol.(placement.Observer)
			if !ok {
				continue
			}
			for i, r := range reqs {
				p := placement.Pod{Name: pod.Namespace + "/" + pod.Name + "/" + r.Container, GPU: r.GPU}
				if i == 0 {
					p.CPUMilli, p.MemoryMiB = cpu, mem
				}
				obs.Observe(&p)
			}
		}
	}
}
