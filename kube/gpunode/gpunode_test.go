package gpunode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
)

func TestDeployedCRDIsTheEmbeddedOne(t *testing.T) {
	deployed, err := os.ReadFile("../../deploy/crds/tessera.io_gpunodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(deployed, Manifest()) {
		t.Errorf("deploy/crds/tessera.io_gpunodes.yaml differs from kube/gpunode/crd.yaml; copy one onto the other")
	}
}

func TestObjectRoundTrip(t *testing.T) {
	src, err := simulated.FromSpec("4xH200", catalogtest.Small())
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := src.Discover(context.Background())
	in := nodes[0]
	in.GPUs[2].Health, in.GPUs[2].HealthReason = inventory.Unhealthy, "XID 79"
	in.GPUs[3].MIGMode = inventory.MIGEnabled
	in.GPUs[3].MIGInstances = []inventory.MIGInstance{{UUID: "MIG-1", Profile: "1g.18gb", MemoryMiB: 16384, SMCount: 16}}
	obj := Object(in, 16, SharingShared)
	// Through JSON, as the API server stores it.
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	var back unstructured.Unstructured
	if err := json.Unmarshal(data, &back.Object); err != nil {
		t.Fatal(err)
	}
	out, err := FromObject(&back)
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != in.Name || len(out.GPUs) != 4 {
		t.Fatalf("got %+v", out)
	}
	for i := range in.GPUs {
		a, b := in.GPUs[i], out.GPUs[i]
		if a.UUID != b.UUID || a.Model != b.Model || a.MemoryMiB != b.MemoryMiB || a.Health != b.Health || a.NUMANode != b.NUMANode || a.MIGMode != b.MIGMode || len(a.MIGInstances) != len(b.MIGInstances) {
			t.Errorf("GPU %d: in %+v\nout %+v", i, a, b)
		}
	}
	for a := 0; a < 4; a++ {
		for b := a + 1; b < 4; b++ {
			if in.LinkBetween(a, b).NVLinks != out.LinkBetween(a, b).NVLinks {
				t.Errorf("link %d-%d: %d != %d", a, b, in.LinkBetween(a, b).NVLinks, out.LinkBetween(a, b).NVLinks)
			}
		}
	}
}

func TestFromObjectErrors(t *testing.T) {
	tests := []struct {
		obj  map[string]any
		want string
	}{
		{map[string]any{"metadata": map[string]any{"name": "n"}}, "GPUNode n: status is missing"},
		{map[string]any{"metadata": map[string]any{"name": "n"}, "status": map[string]any{"gpus": "many"}}, "GPUNode n: status:"},
		{map[string]any{"metadata": map[string]any{"name": "n"}, "status": map[string]any{"gpus": []any{
			map[string]any{"uuid": "a", "index": 0, "memoryMiB": 10}, map[string]any{"uuid": "a", "index": 1, "memoryMiB": 10}}}},
			`GPUNode n: node n: gpus[1].uuid "a" is used twice`},
	}
	for _, tc := range tests {
		_, err := FromObject(&unstructured.Unstructured{Object: tc.obj})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromObject: %v, want %q", err, tc.want)
		}
	}
}
