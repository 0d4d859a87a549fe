package kubefilter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Prefers tells whether pod has a soft constraint of its own that the
// SoftScorers rate nodes by: preferred node affinity, preferred pod
// (anti-)affinity, or a ScheduleAnyway topology spread constraint. Placed
// pods' preferred terms and PreferNoSchedule taints count in Scores too,
// but only for pods that prefer: every other pod keeps the by-class path.
func Prefers(pod *corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			return true
		}
	}
	return false
}

// Scores rates each of the nodes (by name) for pod by the SoftScorers, as
// kube-scheduler's scoring does (each plugin's score normalised to
// [0, 100], weighted, summed), over the cluster as the cache holds it now:
// the picks reserved so far count. A node the cache does not hold scores
// 0. An error is a plugin's or the snapshot's failure.
func (f *Filter) Scores(ctx context.Context, pod *corev1.Pod, nodes []string) ([]int64, error) {
	out := make([]int64, len(nodes))
	if f == nil {
		return out, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refresh(pod); err != nil {
		return nil, err
	}
	p := ForFramework(pod)
	infos := make([]fwk.NodeInfo, 0, len(nodes))
	at := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if info, err := f.snapshot.NodeInfos().Get(n); err == nil {
			infos = append(infos, info)
			at[n] = i
		}
	}
	state := framework.NewCycleState()
	if st := f.fw.RunPreScorePlugins(ctx, state, p, infos); !st.IsSuccess() {
		return nil, fmt.Errorf("kubefilter: pod %s: pre-score: %w", key(pod), st.AsError())
	}
	scores, st := f.fw.RunScorePlugins(ctx, state, p, infos)
	if !st.IsSuccess() {
		return nil, fmt.Errorf("kubefilter: pod %s: score: %w", key(pod), st.AsError())
	}
	for _, s := range scores {
		out[at[s.Name]] = s.TotalScore
	}
	return out, nil
}
