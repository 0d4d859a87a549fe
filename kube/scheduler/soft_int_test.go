package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSoftConstraints: preferences steer the choice among nodes the
// packing policy rates alike (CPU-only pods on identical nodes), as
// kube-scheduler's score plugins would: three replicas preferring not to
// share a node take three nodes; six pods spread ScheduleAnyway over three
// zones take two per zone; a pod preferring a node label gets that node.
// Without the preferences the fixed tie order would stack each row's pods
// on one node.
func TestSoftConstraints(t *testing.T) {
	ctx, client := controlPlane(t)
	for i := 1; i <= 3; i++ {
		kfNode(ctx, t, client, fmt.Sprintf("pa-%d", i), "pa", nil, nil)
		kfNode(ctx, t, client, fmt.Sprintf("sa-%d", i), "sa", map[string]string{zoneLabel: fmt.Sprintf("z%d", i)}, nil)
		disk := map[string]string{"disk": "hdd"}
		if i == 2 {
			disk["disk"] = "ssd"
		}
		kfNode(ctx, t, client, fmt.Sprintf("na-%d", i), "na", disk, nil)
	}
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	for i := 1; i <= 3; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("pa-web-%d", i), "pa", map[string]string{"app": "pa-web"}, nil, func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pa-web"}}, TopologyKey: hostnameKey}}}}}
		})
	}
	for i := 1; i <= 6; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("sa-%d", i), "sa", map[string]string{"app": "sa"}, nil, func(s *corev1.PodSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneLabel,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sa"}}}}
		})
	}
	kfPod(ctx, t, client, "na-fast", "na", nil, nil, func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}}}}
	})
	for _, r := range []struct {
		row   string
		nodes []string
	}{
		{"pa-web-", []string{"pa-1", "pa-2", "pa-3"}},
		{"sa-", []string{"sa-1", "sa-1", "sa-2", "sa-2", "sa-3", "sa-3"}},
		{"na-fast", []string{"na-2"}},
	} {
		waitFor(t, r.row+" steered by its preference", func() error { return rowEnds(ctx, client, r.row, len(r.nodes), r.nodes, "") })
	}
}
