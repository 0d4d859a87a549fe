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
