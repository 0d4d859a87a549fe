package draclaims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// twoGPUs is node n1 of two H100s, as its agent publishes them.
func twoGPUs() *inventory.Node {
	gpu := func(i int) inventory.GPU {
		return inventory.GPU{UUID: fmt.Sprintf("GPU-%d", i), Index: i, Model: "H100", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy}
	}
	return &inventory.Node{Name: "n1", GPUs: []inventory.GPU{gpu(0), gpu(1)}}
}

// informers holds what the Allocator's listers read.
type informers struct {
	claims, slices, classes cache.Indexer
}

func newInformers(t *testing.T, inv *inventory.Node, claims ...*resourceapi.ResourceClaim) informers {
	t.Helper()
	ns := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	in := informers{claims: cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns), slices: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		classes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	add := func(idx cache.Indexer, obj any) {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range claims {
		add(in.claims, c)
	}
	pool := kdra.Resources(inv).Pools[inv.Name]
	for i, s := range pool.Slices {
		add(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", inv.Name, i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: kdra.DriverName, NodeName: &inv.Name, Devices: s.Devices,
				Pool: resourceapi.ResourcePool{Name: inv.Name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}}})
	}
	for _, dc := range kdra.DeviceClasses("") {
		add(in.classes, &dc)
	}
	return in
}

func (in informers) allocator(c kubernetes.Interface) *Allocator {
	return New(Config{Claims: resourcelisters.NewResourceClaimLister(in.claims), Slices: resourcelisters.NewResourceSliceLister(in.slices),
		Classes: resourcelisters.NewDeviceClassLister(in.classes), Client: c, Catalog: catalog.Default()})
}

// podOf is a pod that names claims (its reference "gpu-i" names claims[i]).
func podOf(name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("gpu-%d", i), ResourceClaimName: &c})
	}
	return p
}

// withUID is claim c as the API server stores it: its identity, and its
// requests' allocation mode defaulted.
func withUID(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c.UID, c.ResourceVersion = types.UID("uid-"+c.Name), "1"
	for _, r := range c.Spec.Devices.Requests {
		r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
	}
	return c
}

// TestPodClaimsResolve: a pod's claims become engine parts after its own,
// only nodes that publish Tessera's devices take a claim to allocate, a
// claim not there yet (or its template's not made) makes the pod wait,
// and where claims are not served a pod that names one is refused.
func TestPodClaimsResolve(t *testing.T) {
	inv := twoGPUs()
	a := newInformers(t, inv, withUID(shareClaim("x", "0.5", "10Gi", ""))).allocator(nil)
	if pc, err := a.PodClaims(podOf("none")); pc != nil || err != nil {
		t.Fatalf("a pod with no claims: %+v, %v; want nil, nil", pc, err)
	}
	pc, err := a.PodClaims(podOf("p", "x"))
	if err != nil {
		t.Fatal(err)
	}
	parts, reqs := pc.AppendParts("default/p", []placement.Pod{{Name: "default/p"}}, []workload.ContainerRequest{{}})
	if len(parts) != 2 || parts[1].Name != "default/p/claim x/gpu" || parts[1].GPU.ComputeMilli != 500 || len(reqs) != 2 || reqs[1].Container != "" {
		t.Fatalf("parts %+v (requests %+v), want the pod's then one of 500 milli for claim x", parts, reqs)
	}
	n1, n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	if why := pc.Excludes(n1); why != "" {
		t.Errorf("n1 publishes the devices, yet excluded: %s", why)
	}
	if why := pc.Excludes(n2); !strings.Contains(why, "publishes no DRA devices") {
		t.Errorf("n2 publishes none: excluded for %q", why)
	}

	var wait Wait
	if _, err := a.PodClaims(podOf("q", "missing")); !errors.As(err, &wait) || !strings.Contains(err.Error(), "waiting for ResourceClaim missing to be created") {
		t.Errorf("claim not created: %v, want a Wait", err)
	}
	tmpl := podOf("r")
	tmpl.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("whole")}}
	if _, err := a.PodClaims(tmpl); !errors.As(err, &wait) || !strings.Contains(err.Error(), "template whole") {
		t.Errorf("template's claim not made: %v, want a Wait", err)
	}
	if _, err := New(Config{}).PodClaims(podOf("p", "x")); err == nil || errors.As(err, &wait) || !strings.Contains(err.Error(), "does not serve ResourceClaims") {
		t.Errorf("claims not served: %v, want a refusal saying so", err)
	}
}

// TestAllocateOnChosenDevices: a pod's claim is allocated on the device
// of the share the policy chose, taking its compute and memory; a second
// pod that names the claim joins it on that node (waiting for the first
// binding's write) and is kept off other nodes; a claim that does not fit
// the chosen device beside the assumed one waits.
func TestAllocateOnChosenDevices(t *testing.T) {
	ctx := context.Background()
	inv := twoGPUs()
	x, y := withUID(shareClaim("x", "0.5", "10Gi", "")), withUID(shareClaim("y", "0.6", "10Gi", ""))
	a := newInformers(t, inv, x, y).allocator(nil)
	n1, n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	onGPU1 := func(asked *[]int) func(int) []binding.Share {
		return func(j int) []binding.Share {
			*asked = append(*asked, j)
			return []binding.Share{{Index: 1, UUID: "GPU-1", ComputeMilli: 500, MemoryMiB: 10240}}
		}
	}
	resolve := func(p *corev1.Pod) *PodClaims {
		t.Helper()
		pc, err := a.PodClaims(p)
		if err != nil {
			t.Fatal(err)
		}
		pc.AppendParts(p.Namespace+"/"+p.Name, []placement.Pod{{}}, []workload.ContainerRequest{{}})
		return pc
	}

	p := podOf("p", "x")
	var asked []int
	ws, use, err := a.Allocate(ctx, n1, inv, resolve(p), onGPU1(&asked), &Lists{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].alloc == nil || ws[0].written == nil || len(ws[0].alloc.Devices.Results) != 1 {
		t.Fatalf("writes %+v, want claim x allocated", ws)
	}
	if r := ws[0].alloc.Devices.Results[0]; r.Pool != "n1" || r.Device != kdra.DeviceName(1) {
		t.Errorf("claim x allocated %s/%s, want n1/%s (the policy's choice)", r.Pool, r.Device, kdra.DeviceName(1))
	}
	if len(asked) != 1 || asked[0] != 1 || use != (queueing.Resources{GPUMilli: 500, GPUMemoryMiB: 10240}) {
		t.Errorf("shares asked of parts %v, use %+v; want part 1's, 500 milli and 10240 MiB", asked, use)
	}
	a.Assume(p, ws)

	q := podOf("q", "x")
	pcq := resolve(q)
	if why := pcq.Excludes(n2); !strings.Contains(why, "ResourceClaim x is allocated on other nodes") {
		t.Errorf("q on n2: excluded for %q, want claim x's node", why)
	}
	asked = nil
	wq, use, err := a.Allocate(ctx, n1, inv, pcq, onGPU1(&asked), nil)
	if err != nil || len(wq) != 1 || wq[0].alloc != nil || wq[0].wait != ws[0].written || len(asked) != 0 || use != (queueing.Resources{}) {
		t.Fatalf("q joining x: %+v, %+v, %v (shares asked of %v); want one join waiting for p's write, nothing taken", wq, use, err, asked)
	}

	var wait Wait
	if _, _, err := a.Allocate(ctx, n1, inv, resolve(podOf("r", "y")), onGPU1(&asked), nil); !errors.As(err, &wait) || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("0.6 beside the assumed 0.5 on GPU 1: %v, want a Wait", err)
	}
	a.Forget(p, ws)
	if _, _, err := a.Allocate(ctx, n1, inv, resolve(podOf("r", "y")), onGPU1(&asked), nil); err != nil {
		t.Errorf("0.6 on GPU 1 once p's allocation is forgotten: %v", err)
	}
}

// TestWriteAndUndo: a binding writes the claim it allocates (finalizer,
// allocation, reservation) and reports each write; a join adds its pod;
// undoing the join keeps the allocation, undoing the allocating binding
// deallocates the claim and drops the finalizer.
func TestWriteAndUndo(t *testing.T) {
	ctx := context.Background()
	inv := twoGPUs()
	x := withUID(shareClaim("x", "0.5", "10Gi", ""))
	client := fake.NewClientset(x)
	a := newInformers(t, inv, x).allocator(client)
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	shares := func(int) []binding.Share {
		return []binding.Share{{Index: 0, UUID: "GPU-0", ComputeMilli: 500, MemoryMiB: 10240}}
	}
	plan := func(p *corev1.Pod) []Write {
		t.Helper()
		pc, err := a.PodClaims(p)
		if err != nil {
			t.Fatal(err)
		}
		pc.AppendParts(p.Name, nil, nil)
		ws, _, err := a.Allocate(ctx, n1, inv, pc, shares, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Assume(p, ws)
		return ws
	}
	read := func() *resourceapi.ResourceClaim {
		t.Helper()
		c, err := client.ResourceV1().ResourceClaims("default").Get(ctx, "x", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reserved := func(c *resourceapi.ResourceClaim) string {
		var out []string
		for _, r := range c.Status.ReservedFor {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}

	p, q := podOf("p", "x"), podOf("q", "x")
	wp, wq := plan(p), plan(q)
	var got []Written
	done := func(w Written) { got = append(got, w) }
	if err := a.Write(ctx, p, wp, done); err != nil {
		t.Fatal(err)
	}
	c := read()
	if c.Status.Allocation == nil || reserved(c) != "p" || !hasFinalizer(c) {
		t.Fatalf("after p's binding: allocated %v, reserved for %q, finalizers %v; want allocated for p with %s", c.Status.Allocation != nil, reserved(c), c.Finalizers, resourceapi.Finalizer)
	}
	if err := a.Write(ctx, q, wq, done); err != nil {
		t.Fatal(err)
	}
	if c := read(); reserved(c) != "p,q" {
		t.Fatalf("after q joins: reserved for %q, want p,q", reserved(c))
	}
	if len(got) != 2 || got[0].Claim != x.UID || got[0].Pod != p.UID || got[1].Pod != q.UID {
		t.Errorf("writes reported %+v, want x for p, then for q", got)
	}

	a.Undo(ctx, q, wq)
	if c := read(); c.Status.Allocation == nil || reserved(c) != "p" {
		t.Fatalf("after q's join is undone: allocated %v, reserved for %q; want p's allocation kept", c.Status.Allocation != nil, reserved(c))
	}
	a.Undo(ctx, p, wp)
	if c := read(); c.Status.Allocation != nil || reserved(c) != "" || hasFinalizer(c) {
		t.Errorf("after p's binding is undone: allocated %v, reserved for %q, finalizers %v; want none", c.Status.Allocation != nil, reserved(c), c.Finalizers)
	}
}

func hasFinalizer(c *resourceapi.ResourceClaim) bool {
	return slices.Contains(c.Finalizers, resourceapi.Finalizer)
}

func ptrTo[T any](v T) *T { return &v }

// TestChosenDevice: the policy's share names the GPU's device, or for a
// MIG instance the MIG device of its profile and start.
func TestChosenDevice(t *testing.T) {
	for _, tc := range []struct {
		sh   binding.Share
		want string
	}{
		{binding.Share{Index: 3, ComputeMilli: 500}, "gpu-3"},
		{binding.Share{Index: 1, MIGProfile: "1g.10gb+me", MIG: &binding.MIGInstance{Start: 2, Create: true}}, "gpu-1-mig-1g-10gb-me-2"},
		{binding.Share{Index: 1, MIGProfile: "3g.40gb", MIG: &binding.MIGInstance{Start: -1}}, "gpu-1"},
	} {
		if got := chosenDevice(tc.sh); got != tc.want {
			t.Errorf("chosenDevice(%+v) = %q, want %q", tc.sh, got, tc.want)
		}
	}
}
