package dra

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/request"
)

func caps(kv ...string) map[resourceapi.QualifiedName]resource.Quantity {
	m := map[resourceapi.QualifiedName]resource.Quantity{}
	for i := 0; i < len(kv); i += 2 {
		m[resourceapi.QualifiedName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return m
}

func TestShare(t *testing.T) {
	burst := &ShareConfig{APIVersion: ConfigAPIVersion, Kind: ConfigKind, ComputeLimit: "0.8"}
	for _, tc := range []struct {
		name string
		caps map[resourceapi.QualifiedName]resource.Quantity
		cfg  *ShareConfig
		want request.GPU
	}{
		{"no capacity is a whole GPU", nil, nil, request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000}},
		{"compute only: memory follows", caps("compute", "250m"), nil, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}},
		{"compute written as a decimal", caps("compute", "0.5"), nil, request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500}},
		{"compute and memory", caps("compute", "250m", "memory", "20Gi"), nil, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 20480}},
		{"memory only: compute follows", caps("memory", "20Gi"), nil, request.GPU{Count: 1, MemoryMiB: 20480}},
		{"memory in bytes rounds up to MiB", caps("compute", "0.5", "memory", "1048577"), nil, request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryMiB: 2}},
		{"burst limit", caps("compute", "250m"), burst, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 800}},
		{"memory limit", caps("compute", "250m", "memory", "20Gi"), &ShareConfig{MemoryLimit: "40Gi"}, request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 20480, MemoryLimitMiB: 40960}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Share(tc.caps, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != tc.want.Count || got.ComputeMilli != tc.want.ComputeMilli || got.ComputeLimitMilli != tc.want.ComputeLimitMilli ||
				got.MemoryMiB != tc.want.MemoryMiB || got.MemoryLimitMiB != tc.want.MemoryLimitMiB {
				t.Errorf("Share = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestShareRefusesBadClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps map[resourceapi.QualifiedName]resource.Quantity
		cfg  *ShareConfig
		want []string
	}{
		{"unknown capacity", caps("cores", "4"), nil, []string{"capacity.requests", `unknown capacity "cores"`, "compute and memory"}},
		{"compute above a GPU", caps("compute", "2"), nil, []string{"capacity.requests.compute", "(0, 1]", `"2"`}},
		{"compute finer than a thousandth", caps("compute", "0.0001"), nil, []string{"capacity.requests.compute", "thousandth"}},
		{"limit below the guarantee", caps("compute", "0.5"), &ShareConfig{ComputeLimit: "0.25"}, []string{"opaque.parameters.computeLimit", `"0.25"`, "capacity.requests.compute"}},
		{"memory limit below memory", caps("compute", "0.5", "memory", "20Gi"), &ShareConfig{MemoryLimit: "10Gi"}, []string{"opaque.parameters.memoryLimit", "capacity.requests.memory"}},
		{"zero memory", caps("memory", "0"), nil, []string{"capacity.requests.memory", "at least 1Mi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Share(tc.caps, tc.cfg, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestDecodeShareConfig(t *testing.T) {
	c, err := DecodeShareConfig([]byte(`{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.8","memoryLimit":"40Gi"}`))
	if err != nil || c.ComputeLimit != "0.8" || c.MemoryLimit != "40Gi" {
		t.Fatalf("DecodeShareConfig = %+v, %v", c, err)
	}
	for raw, want := range map[string]string{
		`{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","burst":"0.8"}`: `unknown field "burst"`,
		`{"apiVersion":"gpu.tessera.io/v1","kind":"ShareConfig"}`:                     "must be apiVersion gpu.tessera.io/v1alpha1, kind ShareConfig",
		`{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"Share"}`:                     `"Share"`,
		`not json`: "opaque.parameters",
	} {
		if _, err := DecodeShareConfig([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeShareConfig(%s) error %v, want it to say %q", raw, err, want)
		}
	}
}
