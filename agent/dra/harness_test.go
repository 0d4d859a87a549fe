package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// fakeArbiter stands in for the node arbiter (arbiter.Enforcer): the
// seats it holds, refusing registrations while refuse is set.
type fakeArbiter struct {
	mu        sync.Mutex
	seats     map[string]seat
	registers int
	refuse    error
}

type seat struct {
	dir  string
	gpus []binding.Share
}

func newFakeArbiter() *fakeArbiter { return &fakeArbiter{seats: map[string]seat{}} }

func (f *fakeArbiter) Register(_ context.Context, key, dir string, gpus []binding.Share) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.registers++
	f.seats[key] = seat{dir: dir, gpus: slices.Clone(gpus)}
	return nil
}

func (f *fakeArbiter) Unregister(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seats, key)
	return nil
}

func (f *fakeArbiter) seat(key string) (seat, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.seats[key]
	return s, ok
}

func (f *fakeArbiter) count() (seats, registers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seats), f.registers
}

// testNode has two H200s; their device nodes are /dev/nvidia4 and 7
// (minors differ from indexes, as on hosts whose GPUs were renumbered).
func testNode() inventory.Node {
	return inventory.Node{Name: "node-a", GPUs: []inventory.GPU{
		{UUID: "GPU-aaaa", Index: 0, Model: "H200", MemoryMiB: 143771, Health: inventory.Healthy},
		{UUID: "GPU-bbbb", Index: 1, Model: "H200", MemoryMiB: 143771, Health: inventory.Healthy},
	}}
}

var minors = map[string]int{"GPU-aaaa": 4, "GPU-bbbb": 7}

func fakeLocate(uuids []string) ([]cdi.Unit, error) {
	var out []cdi.Unit
	for _, u := range uuids {
		m, ok := minors[u]
		if !ok {
			return nil, errors.New("no GPU " + u)
		}
		out = append(out, cdi.Unit{UUID: u, GPUMinor: m})
	}
	return out, nil
}

// env is one plugin's world: its folders, the API server's claims (a
// fake clientset) and the arbiter.
type env struct {
	t                                          *testing.T
	root, state, cdiDir, run, plugin, registry string
	hostRoot, lib, libFile                     string
	client                                     *fake.Clientset
	arb                                        *fakeArbiter
	paths                                      handoff.Paths
	mps                                        MPS
}

func newEnv(t *testing.T) *env {
	root := t.TempDir()
	e := &env{t: t, root: root, client: fake.NewClientset(), arb: newFakeArbiter(),
		state: filepath.Join(root, "state"), cdiDir: filepath.Join(root, "cdi"), run: filepath.Join(root, "run"),
		plugin: filepath.Join(root, "p"), registry: filepath.Join(root, "reg"), hostRoot: filepath.Join(root, "host")}
	for _, d := range []string{e.registry, filepath.Join(e.hostRoot, "dev"), filepath.Join(root, "lib", "v1")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"dev/nvidiactl", "dev/nvidia-uvm"} {
		if err := os.WriteFile(filepath.Join(e.hostRoot, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The library as tessera install-lib leaves it: a versioned file
	// behind a stable symlink.
	e.libFile = filepath.Join(root, "lib", "v1", "libtessera-intercept.so")
	e.lib = filepath.Join(root, "lib", "libtessera-intercept.so")
	if err := os.WriteFile(e.libFile, []byte("lib"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.libFile, e.lib); err != nil {
		t.Fatal(err)
	}
	e.paths = handoff.Paths{HostStateRoot: e.run, HostArbiterDir: filepath.Join(root, "arbiter"), HostInterceptLibrary: e.lib}
	return e
}

func (e *env) config() Config {
	return Config{Node: testNode, Paths: e.paths, Enforcer: e.arb, MPS: e.mps, StateDir: e.state, CDIDir: e.cdiDir, Locate: fakeLocate, HostRoot: e.hostRoot}
}

// start runs a plugin on e's folders as the agent does (Serve) and
// returns a client speaking kubelet's DRA API to its socket; the plugin
// stops at the end of the test or when stop is called.
func (e *env) start() (p *Plugin, kubelet drapb.DRAPluginClient, stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, e.config())
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- p.Serve(ctx, ServeOptions{Client: e.client, NodeName: "node-a", PluginDir: e.plugin, RegistryDir: e.registry})
	}()
	conn, err := grpc.NewClient("unix://"+filepath.Join(e.plugin, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Serve: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return p, drapb.NewDRAPluginClient(conn), stop
}

const shareConfig = `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.8"}`

// shareClaim is a claim for compute 0.5 with burst limit 0.8 (the
// ShareConfig), allocated on device of pool, as the API server stores it
// once the scheduler has written the allocation.
func shareClaim(name, uid, pool, device, params string) *resourceapi.ResourceClaim {
	shareID := types.UID("share-" + uid)
	cfg := resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver: kdra.DriverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(uid), ResourceVersion: "7", Generation: 1},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "shared-gpu.tessera.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse("0.5")}},
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: cfg}},
		}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: kdra.DriverName, Pool: pool, Device: device, ShareID: &shareID,
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse("500m"), kdra.CapacityMemory: resource.MustParse("0")}}},
				Config: []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: cfg}},
			},
			NodeSelector: nil,
		}},
	}
}

// store puts claims into the API server (the fake clientset).
func (e *env) store(claims ...*resourceapi.ResourceClaim) {
	e.t.Helper()
	for _, c := range claims {
		if _, err := e.client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func ref(c *resourceapi.ResourceClaim) *drapb.Claim {
	return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
}

func prepare(t *testing.T, kubelet drapb.DRAPluginClient, claims ...*resourceapi.ResourceClaim) map[string]*drapb.NodePrepareResourceResponse {
	t.Helper()
	req := &drapb.NodePrepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, ref(c))
	}
	resp, err := kubelet.NodePrepareResources(context.Background(), req, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	return resp.Claims
}

func unprepare(t *testing.T, kubelet drapb.DRAPluginClient, claims ...*resourceapi.ResourceClaim) map[string]*drapb.NodeUnprepareResourceResponse {
	t.Helper()
	req := &drapb.NodeUnprepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, ref(c))
	}
	resp, err := kubelet.NodeUnprepareResources(context.Background(), req, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	return resp.Claims
}
