package podgroups

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDeployedCRDIsTheEmbeddedOne(t *testing.T) {
	deployed, err := os.ReadFile("../../deploy/crds/tessera.io_podgroups.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(deployed, Manifest()) {
		t.Error("deploy/crds/tessera.io_podgroups.yaml differs from kube/podgroups/crd.yaml; copy one onto the other")
	}
}

func TestFromObject(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g", "namespace": "ns"}, "spec": spec}}
	}
	g, err := FromObject(obj(map[string]any{"minMember": int64(4), "scheduleTimeoutSeconds": int64(90)}))
	if err != nil || g != (Group{Namespace: "ns", Name: "g", MinMember: 4, Timeout: 90 * time.Second}) {
		t.Fatalf("FromObject = %+v, %v", g, err)
	}
	for _, tc := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{}, "podgroup ns/g: spec.minMember: must be a whole number in [1, 10000]"},
		{map[string]any{"minMember": int64(0)}, "spec.minMember: must be a whole number in [1, 10000]"},
		{map[string]any{"minMember": "four"}, "spec.minMember: must be a whole number in [1, 10000]"},
		{map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(-1)}, "spec.scheduleTimeoutSeconds: must be a whole number of seconds >= 0"},
	} {
		if _, err := FromObject(obj(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromObject(%v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestFromVolcano(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
			"metadata": map[string]any{"name": "job-1", "namespace": "ns"}, "spec": spec}}
	}
	for _, tc := range []struct {
		spec map[string]any
		want VolcanoGroup
	}{
		{map[string]any{"minMember": int64(3), "queue": "research"}, VolcanoGroup{Group{Namespace: "ns", Name: "job-1", MinMember: 3}, "research"}},
		{map[string]any{"minMember": int64(0)}, VolcanoGroup{Group{Namespace: "ns", Name: "job-1", MinMember: 1}, ""}},
		{map[string]any{"queue": "default"}, VolcanoGroup{Group{Namespace: "ns", Name: "job-1", MinMember: 1}, "default"}},
	} {
		g, err := FromVolcano(obj(tc.spec))
		if err != nil || g != tc.want {
			t.Errorf("FromVolcano(%v) = %+v, %v; want %+v", tc.spec, g, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"minMember": int64(-1)}, "volcano podgroup ns/job-1: spec.minMember: must be a whole number in [0, 10000], got -1"},
		{map[string]any{"minMember": "two"}, "spec.minMember: must be a whole number in [0, 10000], got two"},
		{map[string]any{"minMember": int64(2), "queue": int64(4)}, "spec.queue: must be a string, got 4"},
	} {
		if _, err := FromVolcano(obj(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromVolcano(%v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}
