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
