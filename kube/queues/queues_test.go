package queues

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/queueing"
)

func TestDeployedCRDIsTheEmbeddedOne(t *testing.T) {
	deployed, err := os.ReadFile("../../deploy/crds/tessera.io_queues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(deployed, Manifest()) {
		t.Error("deploy/crds/tessera.io_queues.yaml differs from kube/queues/crd.yaml; copy one onto the other")
	}
}

func obj(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "team"}, "spec": spec}}
}

func TestFromObject(t *testing.T) {
	q, err := FromObject(obj(map[string]any{
		"parent": "org", "priority": int64(5), "weight": int64(2),
		"guaranteed": map[string]any{"gpu": "4", "gpuMemory": "320Gi", "cpu": int64(64), "memory": "512Gi"},
		"limit":      map[string]any{"gpu": "8"}, "idleReclaimAfter": "2h",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := queueing.Queue{Name: "team", Parent: "org", Priority: 5, Weight: 2,
		Guaranteed: queueing.Resources{GPUMilli: 4000, GPUMemoryMiB: 320 * 1024, CPUMilli: 64000, MemoryMiB: 512 * 1024},
		Limit:      queueing.Resources{GPUMilli: 8000}, IdleReclaimAfter: 2 * time.Hour}
	if q != want {
		t.Fatalf("FromObject = %+v\nwant %+v", q, want)
	}
	for _, tc := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"parent": int64(3)}, "queue team: spec.parent: must be a string, got a number"},
		{map[string]any{"weight": "heavy"}, "queue team: spec.weight: must be a whole number, got a string"},
		{map[string]any{"weight": int64(-1)}, "queue team: spec.weight: must be in [0, 2147483647] (0 means 1), got -1"},
		{map[string]any{"priority": int64(1) << 40}, "queue team: spec.priority: must be in [-2147483648, 2147483647], got 1099511627776"},
		{map[string]any{"guaranteed": map[string]any{"gpu": "4"}, "limit": map[string]any{"gpu": "2"}}, "queue team: spec.guaranteed: must be within spec.limit"},
		{map[string]any{"guaranteed": map[string]any{"gpu": "lots"}}, `queue team: spec.guaranteed.gpu: must be a number of GPUs such as 4 or 0.5, got "lots"`},
		{map[string]any{"limit": map[string]any{"memory": "1TB"}}, `queue team: spec.limit.memory: must be a size such as 512Gi, got "1TB"`},
		{map[string]any{"limit": "none"}, "queue team: spec.limit: must be an object, got a string"},
		{map[string]any{"idleReclaimAfter": "5m"}, "queue team: spec.idleReclaimAfter: must be 0 (off) or in [30m, 168h], got 5m0s"},
		{map[string]any{"idleReclaimAfter": int64(3600)}, "queue team: spec.idleReclaimAfter: must be a string, got a number"},
	} {
		if _, err := FromObject(obj(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromObject(%v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestTree(t *testing.T) {
	named := func(name string, spec map[string]any) *unstructured.Unstructured {
		u := obj(spec)
		u.SetName(name)
		return u
	}
	for _, tc := range []struct {
		name        string
		objs        []*unstructured.Unstructured
		wantQueues  []string // in the tree, default included
		wantSkipped int
		wantErr     bool
	}{
		{"none", nil, []string{"default"}, 0, false},
		{"two, listed out of order", []*unstructured.Unstructured{named("b", map[string]any{"weight": 1}), named("a", map[string]any{"weight": 2})},
			[]string{"a", "b", "default"}, 0, false},
		{"an invalid one is left out", []*unstructured.Unstructured{named("a", map[string]any{"weight": "heavy"}), named("b", map[string]any{"weight": 1})},
			[]string{"b", "default"}, 1, false},
		{"an unknown parent leaves the default only", []*unstructured.Unstructured{named("a", map[string]any{"parent": "nowhere"})},
			[]string{"default"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, skipped, err := Tree(tc.objs)
			if (err != nil) != tc.wantErr || len(skipped) != tc.wantSkipped {
				t.Fatalf("err %v, %d skipped; want error %v, %d skipped", err, len(skipped), tc.wantErr, tc.wantSkipped)
			}
			got := tree.Names()
			slices.Sort(got)
			if !slices.Equal(got, tc.wantQueues) {
				t.Fatalf("queues %v, want %v", got, tc.wantQueues)
			}
		})
	}
}
