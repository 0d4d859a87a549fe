package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// classes is a DeviceClassLister over the classes read back from the API.
type classes []*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return c, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, dc := range c {
		if dc.Name == name {
			return dc, nil
		}
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

// installClasses creates Tessera's DeviceClasses (the extended resource
// tessera.io/gpu mapped) with strict field validation and returns them as
// the API server stored them.
func installClasses(ctx context.Context, t *testing.T, client kubernetes.Interface) classes {
	t.Helper()
	var installed classes
	for _, dc := range DeviceClasses("tessera.io/gpu") {
		got, err := client.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			t.Fatalf("create DeviceClass %s: %v", dc.Name, err)
		}
		installed = append(installed, got)
	}
	return installed
}

// publishSlices creates the Node named node and publishes res through the
// resourceslice helper (owned by the Node, as the agent does), and
// returns the slices once the API server holds them all.
func publishSlices(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, res *resourceslice.DriverResources) []*resourceapi.ResourceSlice {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 10)
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: DriverName, KubeClient: client, Owner: NodeOwner(node), Resources: res,
		ErrorHandler: func(_ context.Context, err error, msg string) { errs <- fmt.Errorf("%s: %w", msg, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Stop)
	want := len(res.Pools[node].Slices)
	var published []*resourceapi.ResourceSlice
	deadline := time.Now().Add(time.Minute) // a liveness bound, not a performance one
	for len(published) < want {
		select {
		case err := <-errs:
			t.Fatalf("publishing slices: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ResourceSlices published within a minute", len(published), want)
		}
		time.Sleep(100 * time.Millisecond)
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		published = published[:0]
		for i := range list.Items {
			published = append(published, &list.Items[i])
		}
	}
	return published
}

// TestDeviceModelOnRealControlPlane publishes a node's GPUs through the
// resourceslice helper to the real API server (v1.37, its default feature
// gates), installs the DeviceClasses with strict field validation, and
// lets Kubernetes' own structured allocator (the code kube-scheduler's DRA
// plugin runs) allocate claims against what the API server kept: two
// half-GPU claims share the shared GPU, a third finds no room (the
// exclusive GPU is not in the shared class, the unhealthy one is tainted),
// a claim that names no capacity takes the exclusive GPU whole, a claim
// for more compute than a GPU has fits nowhere, and the allocations
// (consumed capacity, share IDs) are accepted in the claims' status.
func TestDeviceModelOnRealControlPlane(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, false)
	client := kubernetes.NewForConfigOrDie(cfg)
	strict := metav1.CreateOptions{FieldValidation: "Strict"}

	installed := installClasses(ctx, t, client)
	if e := installed[0].Spec.ExtendedResourceName; e == nil || *e != "tessera.io/gpu" {
		t.Fatalf("the API server dropped extendedResourceName: %+v", installed[0].Spec)
	}

	n := &inventory.Node{Name: "gpu-node", DriverVersion: "570.133.20", GPUs: []inventory.GPU{
		{UUID: "GPU-shared", Index: 0, Model: "H200", MemoryMiB: 143771, NUMANode: 0, Health: inventory.Healthy},
		{UUID: "GPU-exclusive", Index: 1, Model: "H200", MemoryMiB: 143771, NUMANode: 0, Health: inventory.Healthy, Sharing: inventory.SharingExclusive},
		{UUID: "GPU-sick", Index: 2, Model: "H200", MemoryMiB: 143771, NUMANode: 1, Health: inventory.Unhealthy},
	}}
	published := publishSlices(ctx, t, client, n.Name, Resources(n))
	if len(published) != 1 || published[0].Spec.Driver != DriverName || published[0].Spec.Pool.Name != "gpu-node" ||
		published[0].Spec.NodeName == nil || *published[0].Spec.NodeName != "gpu-node" {
		t.Fatalf("slices %+v, want one of %s for pool gpu-node", published, DriverName)
	}
	devs := published[0].Spec.Devices
	if len(devs) != 3 {
		t.Fatalf("published %d devices, want 3", len(devs))
	}
	// What the API server kept is what was meant: no field dropped by a
	// feature gate that is off.
	want := Devices(n)
	for i := range devs {
		if !resourceslice.DevicesDeepEqual(devs[i:i+1], want[i:i+1]) {
			t.Errorf("device %s stored as %+v, want %+v", want[i].Name, devs[i], want[i])
		}
	}

	// The features kube-scheduler v1.37 enables by default that touch
	// these devices.
	features := structured.Features{ConsumableCapacity: true, FractionalCapacityRange: true, DeviceTaints: true, PrioritizedList: true}
	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node"}}
	allocate := func(name, class string, capacity map[resourceapi.QualifiedName]resource.Quantity) (*resourceapi.ResourceClaim, string) {
		t.Helper()
		req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}
		if capacity != nil {
			req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
		}
		claim, err := client.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}},
		}, strict)
		if err != nil {
			t.Fatalf("create claim %s: %v", name, err)
		}
		// A new allocator sees what earlier claims took.
		a, err := structured.NewAllocator(ctx, features, state, installed, published, cel.NewCache(10, cel.Features{}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			t.Fatalf("allocate %s: %v", name, err)
		}
		if len(res) == 0 {
			return claim, ""
		}
		r := res[0].Devices.Results[0]
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
		} else {
			state.AllocatedDevices.Insert(id)
		}
		claim.Status.Allocation = &res[0]
		if _, err := client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("write allocation of %s: %v", name, err)
		}
		return claim, r.Device
	}
	half := map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse("0.5"), CapacityMemory: resource.MustParse("20Gi")}
	if _, dev := allocate("half-a", ClassSharedGPU, half); dev != "gpu-0" {
		t.Errorf("first half on %q, want gpu-0", dev)
	}
	claim, dev := allocate("half-b", ClassSharedGPU, half)
	if dev != "gpu-0" {
		t.Errorf("second half on %q, want gpu-0 (shared)", dev)
	}
	got := claim.Status.Allocation.Devices.Results[0].ConsumedCapacity
	if c, m := got[CapacityCompute], got[CapacityMemory]; c.Cmp(resource.MustParse("500m")) != 0 || m.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("consumed capacity %v, want compute 500m, memory 20Gi", got)
	}
	// What the kubelet plugin will read of it, from the API.
	stored, err := client.ResourceV1().ResourceClaims("default").Get(ctx, "half-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sh, err := Shares(stored, n, nil); err != nil || len(sh) != 1 || sh[0].UUID != "GPU-shared" || sh[0].ComputeMilli != 500 || sh[0].MemoryMiB != 20480 {
		t.Errorf("half-b's shares %+v, %v; want 0.5 of GPU-shared with 20Gi", sh, err)
	}
	if _, dev := allocate("half-c", ClassSharedGPU, half); dev != "" {
		t.Errorf("third half on %q, want nowhere (gpu-0 full, gpu-1 exclusive, gpu-2 unhealthy)", dev)
	}
	if _, dev := allocate("whole", ClassGPU, nil); dev != "gpu-1" {
		t.Errorf("whole GPU on %q, want gpu-1", dev)
	}
	if _, dev := allocate("too-big", ClassGPU, map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse("2")}); dev != "" {
		t.Errorf("two GPUs' compute on one device %q", dev)
	}
	if _, err := Share(map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse("2")}, nil, nil); err == nil {
		t.Error("Tessera accepts compute 2 on one device")
	}
	list, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var allocated []string
	for _, c := range list.Items {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c.Name)
		}
	}
	slices.Sort(allocated)
	if !slices.Equal(allocated, []string{"half-a", "half-b", "whole"}) {
		t.Errorf("allocated claims in the API %v, want half-a half-b whole", allocated)
	}

	// Tessera's pinned allocation, with what the API holds as its state:
	// half-a gone, half-b's 0.5 still counted; a compute-only quarter on
	// the GPU the policy chose books a quarter of its memory, and the API
	// server accepts that allocation and its reservation for a pod.
	if err := client.ResourceV1().ResourceClaims("default").Delete(ctx, "half-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if list, err = client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var inAPI []*resourceapi.ResourceClaim
	for i := range list.Items {
		inAPI = append(inAPI, &list.Items[i])
	}
	held := NewAllocatedState(inAPI)
	pin := func(name, c string) (*resourceapi.ResourceClaim, error) {
		claim, err := client.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: ClassSharedGPU, Capacity: &resourceapi.CapacityRequirements{
					Requests: map[resourceapi.QualifiedName]resource.Quantity{CapacityCompute: resource.MustParse(c)}}}}}}},
		}, strict)
		if err != nil {
			t.Fatalf("create claim %s: %v", name, err)
		}
		res, err := Allocate(ctx, Pinned{Node: node, Inventory: n, Claims: []*resourceapi.ResourceClaim{claim},
			Chosen: map[types.UID][]string{claim.UID: {"gpu-0"}}, Slices: published, Classes: installed, State: &held, Features: SchedulerFeatures()})
		if err != nil {
			return nil, err
		}
		claim.Status.Allocation = &res[0]
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "user", UID: "pod-uid-1"}}
		return client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldValidation: "Strict"})
	}
	if _, err := pin("too-much", "0.6"); !errors.Is(err, ErrNoFit) {
		t.Errorf("0.6 next to half-b on gpu-0: %v, want ErrNoFit", err)
	}
	quarter, err := pin("quarter", "0.25")
	if err != nil {
		t.Fatalf("the API server refuses Tessera's allocation: %v", err)
	}
	if sh, err := Shares(quarter, n, nil); err != nil || len(sh) != 1 || sh[0].UUID != "GPU-shared" || sh[0].ComputeMilli != 250 || sh[0].MemoryMiB != 35942 {
		t.Errorf("the stored quarter reads as %+v, %v; want 250m of GPU-shared with 35942 MiB", sh, err)
	}
}

// TestDocumentedClaimTemplate: the share with burst docs/dra.md shows is
// accepted by the real API server with strict field validation, and reads
// as a guarantee of 0.25 with a burst limit of 0.8 and 20Gi capped at 40Gi.
func TestDocumentedClaimTemplate(t *testing.T) {
	root, err := toolbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "dra.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/dra.md has no yaml block")
	}
	var tmpl resourceapi.ResourceClaimTemplate
	if err := yaml.UnmarshalStrict([]byte(block), &tmpl); err != nil {
		t.Fatalf("the documented template does not decode: %v", err)
	}
	ctx, _, cfg := testcluster.ForTest(t, false)
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, &tmpl, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("the API server refuses the documented template: %v", err)
	}
	spec := tmpl.Spec.Spec.Devices
	if len(spec.Config) != 1 || spec.Config[0].Opaque == nil || spec.Config[0].Opaque.Driver != DriverName {
		t.Fatalf("documented config %+v", spec.Config)
	}
	cfgShare, err := DecodeShareConfig(spec.Config[0].Opaque.Parameters.Raw)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Share(spec.Requests[0].Exactly.Capacity.Requests, &cfgShare, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if g.ComputeMilli != 250 || g.ComputeLimitMilli != 800 || g.MemoryMiB != 20480 || g.MemoryLimitMiB != 40960 {
		t.Errorf("the documented share reads as %+v, want 0.25 (burst 0.8), 20Gi (cap 40Gi)", g)
	}
}

// TestAPIDocClaim: the claim template and pod docs/api.md shows as the DRA
// form of its quarter-GPU example are accepted by the real API server with
// strict field validation, and the claim reads as the annotations' share:
// 0.25 guaranteed, 0.8 burst, 20Gi, on shared GPUs only.
func TestAPIDocClaim(t *testing.T) {
	root, err := toolbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### The same share as a DRA claim")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/api.md has no yaml block under \"The same share as a DRA claim\"")
	}
	tmplDoc, podDoc, ok := strings.Cut(block, "---\n")
	if !ok {
		t.Fatal("the block holds no pod after the template")
	}
	var tmpl resourceapi.ResourceClaimTemplate
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(tmplDoc), &tmpl); err != nil {
		t.Fatalf("the documented template does not decode: %v", err)
	}
	if err := yaml.UnmarshalStrict([]byte(podDoc), &pod); err != nil {
		t.Fatalf("the documented pod does not decode: %v", err)
	}
	ctx, _, cfg := testcluster.ForTest(t, false)
	client := kubernetes.NewForConfigOrDie(cfg)
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	if _, err := client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, &tmpl, strict); err != nil {
		t.Fatalf("the API server refuses the documented template: %v", err)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, &pod, strict); err != nil {
		t.Fatalf("the API server refuses the documented pod: %v", err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "quarter-gpu"}, Spec: tmpl.Spec.Spec}
	reqs, other, err := Requests(claim, catalog.Default())
	if err != nil || other || len(reqs) != 1 {
		t.Fatalf("the documented claim reads as %+v (other drivers %v), %v", reqs, other, err)
	}
	if g := reqs[0].GPU; g.ComputeMilli != 250 || g.ComputeLimitMilli != 800 || g.MemoryMiB != 20480 || !reqs[0].SharedOnly {
		t.Errorf("the documented claim reads as %+v, want 0.25 (burst 0.8), 20Gi, shared GPUs only", reqs[0])
	}
}
