package dra

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// migEnv is a plugin's world on a node whose one H100 is in MIG mode
// with its layout managed by Tessera, behind the simulated driver
// (migsim): the MIG manager the agent would share with the plugin, and
// device nodes located through the simulated NVML.
type migEnv struct {
	*env
	gpu     *migsim.GPU
	lib     *migsim.Lib
	mgr     *migctl.Manager
	changed int
}

func newMIGEnv(t *testing.T) *migEnv {
	e := &migEnv{env: newEnv(t)}
	m, ok := catalog.Default().Lookup("H100-SXM")
	if !ok || !m.SupportsMIG() {
		t.Fatal("H100-SXM: no MIG geometry")
	}
	e.gpu = migsim.NewGPU(m.MIG, "GPU-mig", 3)
	e.lib = &migsim.Lib{GPUs: []*migsim.GPU{e.gpu}}
	gpus, err := migctl.Open(e.lib, map[string]*catalog.MIGSpec{"GPU-mig": m.MIG})
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = migctl.NewManager(gpus)
	if err := os.MkdirAll(e.state, 0o755); err != nil { // as the agent makes it before its MIG journal
		t.Fatal(err)
	}
	if _, err := e.mgr.Journal(filepath.Join(e.state, "mig-journal.json")); err != nil {
		t.Fatal(err)
	}
	caps := filepath.Join(e.hostRoot, cdi.MIGMinorsFile)
	if err := os.MkdirAll(filepath.Dir(caps), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caps, []byte(e.lib.MIGMinors()), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func migTestNode() inventory.Node {
	return inventory.Node{Name: "node-a", GPUs: []inventory.GPU{{UUID: "GPU-mig", Index: 0, Model: "H100-SXM", MemoryMiB: 81559,
		Health: inventory.Healthy, MIGMode: inventory.MIGEnabled, MIGManaged: true}}}
}

func (e *migEnv) config() Config {
	c := e.env.config()
	c.Node, c.Catalog = migTestNode, catalog.Default()
	c.Locate = func(uuids []string) ([]cdi.Unit, error) { return cdi.Locate(e.lib, uuids) }
	c.MIG, c.MIGChanged = e.mgr, func() { e.changed++ }
	return c
}

// migClaim is a claim of the MIG class allocated on the managed GPU's
// device for profile at start.
func migClaim(name, uid, profile string, start int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(uid), ResourceVersion: "7", Generation: 1},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassMIG, Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Selectors: []resourceapi.DeviceSelector{kdra.MIGProfileSelector(profile)}}}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: kdra.DriverName, Pool: "node-a", Device: kdra.MIGDeviceName(0, profile, start)}}}}},
	}
}

// TestPrepareMIGClaim: preparing a claim allocated on a managed GPU's MIG
// device creates that instance (profile and start) through the MIG
// manager, hands the container the instance (its UUID, its GPU's and
// capabilities' device nodes), seats it and asks for a publish; the
// journal's claims name the instance for the agent's restart; unprepare
// destroys it. Without a MIG manager the claim is refused, naming why.
func TestPrepareMIGClaim(t *testing.T) {
	e := newMIGEnv(t)
	claim := migClaim("forty", uidA, "3g.40gb", 4)
	e.store(claim)
	p, err := New(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	if err != nil || res[claim.UID].Err != nil {
		t.Fatalf("prepare: %v %+v", err, res[claim.UID])
	}
	if got := e.gpu.Layout(); got != "3g.40gb@4" {
		t.Errorf("GPU layout %q after prepare, want 3g.40gb@4", got)
	}
	key := Key(claim.UID)
	held := e.mgr.Holds(key)
	if len(held) != 1 || !strings.HasPrefix(held[0].UUID, "MIG-") {
		t.Fatalf("MIG manager holds %+v for %s, want one instance", held, key)
	}
	s, ok := e.arb.seat(key)
	if !ok || len(s.gpus) != 1 || s.gpus[0].UUID != held[0].UUID || s.gpus[0].MIGProfile != "3g.40gb" {
		t.Errorf("seat %+v, want the instance %s", s, held[0].UUID)
	}
	spec := readSpec(t, specPath(e.env, uidA))
	edits := spec.Devices[0].ContainerEdits
	if !slices.Contains(edits.Env, "NVIDIA_VISIBLE_DEVICES="+held[0].UUID) {
		t.Errorf("spec env %v does not hand the instance %s", edits.Env, held[0].UUID)
	}
	var nodes []string
	for _, n := range edits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	if !slices.Contains(nodes, "/dev/nvidia3") || !slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(n, "/dev/nvidia-caps/nvidia-cap") }) {
		t.Errorf("spec device nodes %v, want the GPU's /dev/nvidia3 and the instance's capabilities", nodes)
	}
	if e.changed != 1 {
		t.Errorf("publish asked %d times after prepare, want 1", e.changed)
	}
	wants, err := RecordedMIG(e.state, "node-a")
	if err != nil || len(wants[key]) != 1 || wants[key][0] != (migctl.Want{GPU: "GPU-mig", Profile: "3g.40gb", Start: 4}) {
		t.Errorf("RecordedMIG: %+v, %v; want 3g.40gb at 4 of GPU-mig for %s", wants, err, key)
	}

	out, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, UID: claim.UID}})
	if err != nil || out[claim.UID] != nil {
		t.Fatalf("unprepare: %v %v", err, out[claim.UID])
	}
	if got := e.gpu.Layout(); got != "" || len(e.mgr.Holds(key)) != 0 || e.changed != 2 {
		t.Errorf("after unprepare: layout %q, held %v, publishes %d; want empty, none, 2", got, e.mgr.Holds(key), e.changed)
	}

	// A node agent that manages no MIG GPU refuses the claim.
	plain := e.config()
	plain.MIG, plain.StateDir, plain.CDIDir = nil, filepath.Join(e.root, "state-2"), filepath.Join(e.root, "cdi-2")
	p2, err := New(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	res, _ = p2.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	if err := res[claim.UID].Err; err == nil || !strings.Contains(err.Error(), "the agent manages no MIG GPU") {
		t.Errorf("no MIG manager: %v, want a refusal saying so", err)
	}
}
