package gpunode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
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
	in.MemoryOversubscription = true
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
	if !out.MemoryOversubscription {
		t.Errorf("memoryOversubscription lost on the way: status %v", obj.Object["status"])
	}
	in.MemoryOversubscription = false
	if off, err := FromObject(Object(in, 16, SharingShared)); err != nil || off.MemoryOversubscription {
		t.Errorf("an agent without --oversubscribe reads as oversubscribing (%v)", err)
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
		{map[string]any{"metadata": map[string]any{"name": "n"}, "status": map[string]any{"gpus": []any{
			map[string]any{"uuid": "a", "index": 0, "memoryMiB": 10, "sharing": "timeslice"}}}},
			`GPUNode n: status.gpus[0].sharing: must be one of shared, exclusive, mig, mps, got "timeslice"`},
	}
	for _, tc := range tests {
		_, err := FromObject(&unstructured.Unstructured{Object: tc.obj})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromObject: %v, want %q", err, tc.want)
		}
	}
}

// TestSharingMPS: an MPS node publishes mps for its GPUs and mig for its
// MIG GPUs; the modes read back, and the inventory reads as any other.
func TestSharingMPS(t *testing.T) {
	src, err := simulated.FromSpec("2xH100-SXM", catalogtest.Small())
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := src.Discover(context.Background())
	in := nodes[0]
	in.GPUs[1].MIGMode = inventory.MIGEnabled
	in.GPUs[1].MIGInstances = []inventory.MIGInstance{{UUID: "MIG-1", Profile: "1g.10gb", MemoryMiB: 9728, SMCount: 16}}
	if !ValidSharing(SharingMPS) || ValidSharing("") || ValidSharing("MPS") {
		t.Errorf("ValidSharing: mps must be valid, empty and MPS not")
	}
	data, err := json.Marshal(Object(in, 8, SharingMPS).Object)
	if err != nil {
		t.Fatal(err)
	}
	var back unstructured.Unstructured
	if err := json.Unmarshal(data, &back.Object); err != nil {
		t.Fatal(err)
	}
	modes, err := Sharing(&back)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{in.GPUs[0].UUID: SharingMPS, in.GPUs[1].UUID: SharingMIG}
	if len(modes) != len(want) || modes[in.GPUs[0].UUID] != want[in.GPUs[0].UUID] || modes[in.GPUs[1].UUID] != want[in.GPUs[1].UUID] {
		t.Errorf("Sharing = %v, want %v", modes, want)
	}
	if out, err := FromObject(&back); err != nil || len(out.GPUs) != 2 {
		t.Errorf("FromObject: %v, %+v", err, out)
	}
}

// TestCRDAllowsEverySharingMode: the CRD's enum is SharingModes, so the API
// server stores what the agent may publish.
func TestCRDAllowsEverySharingMode(t *testing.T) {
	for _, line := range strings.Split(string(Manifest()), "\n") {
		if !strings.Contains(line, "sharing: {") {
			continue
		}
		if want := "enum: [" + strings.Join(SharingModes(), ", ") + "]"; !strings.Contains(line, want) {
			t.Errorf("CRD sharing line %q lacks %q", strings.TrimSpace(line), want)
		}
		return
	}
	t.Fatal("no sharing field in the CRD")
}

// TestMIGRoundTrip: a GPU in MIG mode keeps, through the GPUNode and JSON,
// whether Tessera manages its layout and each instance's start slot and
// whether it is in use; an instance whose start was not read keeps none.
func TestMIGRoundTrip(t *testing.T) {
	src, err := simulated.FromSpec("2xH100", catalogtest.Small())
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := src.Discover(context.Background())
	in := nodes[0]
	in.GPUs[0].MIGMode, in.GPUs[0].MIGManaged = inventory.MIGEnabled, true
	in.GPUs[0].MIGInstances = []inventory.MIGInstance{
		{UUID: "MIG-a", Profile: "3g.40gb", MemoryMiB: 40448, Start: inventory.Slot(4), InUse: true},
		{UUID: "MIG-b", Profile: "1g.10gb", MemoryMiB: 9984, Start: inventory.Slot(0)},
	}
	in.GPUs[1].MIGMode = inventory.MIGEnabled
	in.GPUs[1].MIGInstances = []inventory.MIGInstance{{UUID: "MIG-c", Profile: "7g.80gb", MemoryMiB: 81152}}
	data, err := json.Marshal(Object(in, 16, SharingShared).Object)
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
	for i := range in.GPUs {
		if !reflect.DeepEqual(in.GPUs[i].MIGInstances, out.GPUs[i].MIGInstances) || in.GPUs[i].MIGManaged != out.GPUs[i].MIGManaged {
			t.Errorf("GPU %d: in managed=%v %+v\nout managed=%v %+v", i, in.GPUs[i].MIGManaged, in.GPUs[i].MIGInstances, out.GPUs[i].MIGManaged, out.GPUs[i].MIGInstances)
		}
	}
	if out.GPUs[1].MIGInstances[0].Start != nil {
		t.Errorf("unknown start read back as %d", *out.GPUs[1].MIGInstances[0].Start)
	}
	// A managed GPU not in MIG mode is refused, naming the field.
	bad := Object(in, 16, SharingShared)
	gpus := bad.Object["status"].(map[string]any)["gpus"].([]any)
	gpus[1].(map[string]any)["migMode"] = "Disabled"
	gpus[1].(map[string]any)["migInstances"] = []any{}
	gpus[1].(map[string]any)["migManaged"] = true
	if _, err := FromObject(bad); err == nil || !strings.Contains(err.Error(), "migManaged must be false") {
		t.Errorf("managed GPU not in MIG mode: %v", err)
	}
}
