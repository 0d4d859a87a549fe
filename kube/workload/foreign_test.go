package workload

import (
	"strings"
	"testing"
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
