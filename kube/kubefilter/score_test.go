package kubefilter

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestScoresDirection: each soft constraint rates the nodes the way it
// asks, over the pods placed and the picks reserved.
func TestScoresDirection(t *testing.T) {
	nodes := []*corev1.Node{node("n1", "z1", nil), node("n2", "z1", nil), node("n3", "z2", nil)}
	placed := []*corev1.Pod{pod("web-0", "n1", web, nil), pod("web-1", "n2", web, nil)}
	f := newFilter(t, nodes, placed)
	names := nodeNames(nodes)
	preferredAnti := with(pod("web-2", "", web, nil), func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: term("app", "web", hostname)}}}}
	})
	preferredWith := with(pod("cache", "", nil, nil), func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: term("app", "web", hostname)}}}}
	})
	anyway := with(pod("web-3", "", web, nil), spread(corev1.ScheduleAnyway, "web"))
	zoned := with(pod("zoned", "", nil, nil), func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}}
	})
	for _, tc := range []struct {
		pod  *corev1.Pod
		best []string // the nodes scoring highest
	}{
		{preferredAnti, []string{"n3"}},
		{preferredWith, []string{"n1", "n2"}},
		{anyway, []string{"n3"}}, // zone z1 holds two web pods, z2 none
		{zoned, []string{"n1", "n2"}},
	} {
		if !Prefers(tc.pod) {
			t.Errorf("%s: Prefers false", tc.pod.Name)
		}
		got, err := f.Scores(context.Background(), tc.pod, names)
		if err != nil {
			t.Fatalf("%s: %v", tc.pod.Name, err)
		}
		if b := best(names, got); !equalSets(b, tc.best) {
			t.Errorf("%s: scores %v: best %v, want %v", tc.pod.Name, got, b, tc.best)
		}
	}
	if Prefers(pod("plain", "", web, nil)) {
		t.Errorf("a pod without soft constraints prefers")
	}

	// A pick reserved in the cycle counts: web-2 reserved on n3 makes n3
	// no better than the others for a fourth replica avoiding web pods.
	if why := reserveOnWith(t, f, preferredAnti, "n3", false); why != "" {
		t.Fatal(why)
	}
	fourth := preferredAnti.DeepCopy()
	fourth.Name, fourth.UID = "web-4", "uid-web-4"
	got, err := f.Scores(context.Background(), fourth, names)
	if err != nil {
		t.Fatal(err)
	}
	if got[2] > got[0] {
		t.Errorf("web-4 after web-2 reserved on n3: scores %v, want n3 no better than n1", got)
	}
}

func best(names []string, scores []int64) []string {
	var out []string
	top := int64(-1)
	for i, s := range scores {
		switch {
		case s > top:
			top, out = s, []string{names[i]}
		case s == top:
			out = append(out, names[i])
		}
	}
	return out
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}
