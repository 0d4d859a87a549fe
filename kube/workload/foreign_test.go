package workload

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlacementPolicy(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		want, key string
		ok        bool
		wantErr   string
	}{
		{"none", nil, "", "", false, ""},
		{"tessera", map[string]string{AnnotationPolicy: "fgd"}, "fgd", AnnotationPolicy, true, ""},
		{"HAMi both binpack", map[string]string{HAMiAnnotationNodePolicy: "binpack", HAMiAnnotationGPUPolicy: "binpack"}, "binpack", HAMiAnnotationGPUPolicy, true, ""},
		{"HAMi both spread", map[string]string{HAMiAnnotationNodePolicy: "spread", HAMiAnnotationGPUPolicy: "spread"}, "spread", HAMiAnnotationGPUPolicy, true, ""},
		{"HAMi GPU binpack, node default binpack", map[string]string{HAMiAnnotationGPUPolicy: "binpack"}, "binpack", HAMiAnnotationGPUPolicy, true, ""},
		{"HAMi node spread, GPU default spread", map[string]string{HAMiAnnotationNodePolicy: "spread"}, "spread", HAMiAnnotationNodePolicy, true, ""},
		{"HAMi mixed", map[string]string{HAMiAnnotationNodePolicy: "binpack", HAMiAnnotationGPUPolicy: "spread"}, "", "", false,
			"annotation hami.io/gpu-scheduler-policy: node policy binpack with GPU policy spread has no Tessera equivalent"},
		{"HAMi GPU spread alone is mixed", map[string]string{HAMiAnnotationGPUPolicy: "spread"}, "", "", false, "node policy binpack with GPU policy spread"},
		{"HAMi topology-aware", map[string]string{HAMiAnnotationGPUPolicy: "topology-aware"}, "", "", false,
			`annotation hami.io/gpu-scheduler-policy: must be "binpack" or "spread", got "topology-aware"`},
		{"both conventions", map[string]string{AnnotationPolicy: "spread", HAMiAnnotationGPUPolicy: "spread"}, "", "", false,
			"annotation hami.io/gpu-scheduler-policy: conflicts with tessera.io/placement-policy"},
	}
	for _, tc := range tests {
		p := pod(tc.ann, ctr{"c", nil})
		got, key, ok, err := PlacementPolicy(p)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || key != tc.key || ok != tc.ok {
			t.Errorf("%s: PlacementPolicy = %q, %q, %v, %v; want %q, %q, %v", tc.name, got, key, ok, err, tc.want, tc.key, tc.ok)
		}
	}
}

// TestCheckGangKeys: the queue and gang keys the scheduler could not read
// as written are refused with the key and what to write instead; the
// others pass.
func TestCheckGangKeys(t *testing.T) {
	yes := true
	jobOwned := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "hpo", UID: "u1", Controller: &yes}}
	tests := []struct {
		name   string
		labels map[string]string
		ann    map[string]string
		owners []metav1.OwnerReference
		want   string
	}{
		{"KAI min member on a Job's pod", nil, map[string]string{KAIAnnotationMinMember: "2"}, jobOwned, ""},
		{"KAI min member on a bare pod", nil, map[string]string{KAIAnnotationMinMember: "2"}, nil,
			`annotation kai.scheduler/batch-min-member: set to "2" on a pod that no Job controls: KAI reads it from a Job; for a gang of single pods use label tessera.io/pod-group with annotation tessera.io/pod-group-min-member`},
		{"Volcano group alone", nil, map[string]string{VolcanoAnnotationGroupName: "job-1"}, nil, ""},
		{"Volcano group with a Tessera group", map[string]string{"tessera.io/pod-group": "g"}, map[string]string{VolcanoAnnotationGroupName: "job-1"}, nil,
			`annotation scheduling.k8s.io/group-name: names Volcano PodGroup "job-1" while label tessera.io/pod-group names "g": a pod is in one gang; keep one of them`},
		{"scheduler-plugins group alone", map[string]string{SchedulerPluginsLabelPodGroup: "pg"}, nil, nil, ""},
		{"scheduler-plugins group with a Tessera group", map[string]string{SchedulerPluginsLabelPodGroup: "pg", "tessera.io/pod-group": "g"}, nil, nil,
			`label scheduling.x-k8s.io/pod-group: names PodGroup "pg" while label tessera.io/pod-group names "g": a pod is in one gang; keep one of them`},
		{"scheduler-plugins group with a Volcano group", map[string]string{SchedulerPluginsLabelPodGroup: "pg"}, map[string]string{VolcanoAnnotationGroupName: "job-1"}, nil,
			`label scheduling.x-k8s.io/pod-group: names PodGroup "pg" while annotation scheduling.k8s.io/group-name names Volcano PodGroup "job-1": a pod is in one gang; keep one of them`},
		{"KAI queue agreeing with Tessera's", map[string]string{KAILabelQueue: "a", "tessera.io/queue": "a"}, nil, nil, ""},
		{"KAI queue against Tessera's", map[string]string{KAILabelQueue: "a", "tessera.io/queue": "b"}, nil, nil,
			`label kai.scheduler/queue: label "a" disagrees with label tessera.io/queue "b": keep one of them`},
	}
	for _, tc := range tests {
		p := pod(tc.ann, ctr{"c", nil})
		p.Labels, p.OwnerReferences = tc.labels, tc.owners
		err := CheckGangKeys(p)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.name, err, tc.want)
		}
	}
}
