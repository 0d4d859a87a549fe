package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
)

// shareClaim is a claim of one share of a Tessera GPU: compute and memory
// requested, and a burst limit for compute when limit is not empty.
func shareClaim(name, compute, memory, limit string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: shareClaimSpec(compute, memory, limit)}
}

func shareClaimSpec(compute, memory, limit string) resourceapi.ResourceClaimSpec {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassSharedGPU, Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			kdra.CapacityCompute: resource.MustParse(compute), kdra.CapacityMemory: resource.MustParse(memory)}}}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}}
	if limit != "" {
		raw := fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q,"computeLimit":%q}`, kdra.ConfigAPIVersion, kdra.ConfigKind, limit)
		spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: kdra.DriverName, Parameters: runtime.RawExtension{Raw: raw}}}}}
	}
	return spec
}

// claimPod creates a pod of this scheduler that asks for no GPU in its
// containers, only through its claims (name -> claim or template).
func claimPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, claims, templates map[string]string, mods ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	for ref, claim := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: ref, ResourceClaimName: &claim})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: ref})
	}
	for ref, tmpl := range templates {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: ref, ResourceClaimTemplateName: &tmpl})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: ref})
	}
	for _, m := range mods {
		m(p)
	}
	created, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// installClasses creates Tessera's DeviceClasses.
func installClasses(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	for _, dc := range kdra.DeviceClasses("") {
		if _, err := c.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// draGPUNode creates a KWOK node of two H100s (label inventory) that
// publishes them as DRA devices, as its agent would with --dra.
func draGPUNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	createGPUNode(ctx, t, c, name, map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := nodeinventory.Labels{Catalog: catalog.Default()}.Node(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := createSlices(ctx, c, inv, name); err != nil {
		t.Fatal(err)
	}
}

// inQueue puts a pod in queue q.
func inQueue(q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = map[string]string{queues.LabelQueue: q} }
}

// claimOn checks that claim name is allocated on node, one device of
// Tessera's driver consuming compute, reserved for exactly the pods
// named, with the delete-protection finalizer, and returns its device.
func claimOn(ctx context.Context, c kubernetes.Interface, name, node, compute string, pods ...string) (string, error) {
	cl, err := c.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	a := cl.Status.Allocation
	if a == nil {
		return "", fmt.Errorf("claim %s not allocated", name)
	}
	if len(a.Devices.Results) != 1 {
		return "", fmt.Errorf("claim %s: %d results, want 1", name, len(a.Devices.Results))
	}
	r := a.Devices.Results[0]
	if r.Driver != kdra.DriverName || r.Pool != node {
		return "", fmt.Errorf("claim %s allocated %s/%s/%s, want a device of %s on %s", name, r.Driver, r.Pool, r.Device, kdra.DriverName, node)
	}
	if compute != "" {
		got, ok := r.ConsumedCapacity[kdra.CapacityCompute]
		if !ok || got.Cmp(resource.MustParse(compute)) != 0 {
			return "", fmt.Errorf("claim %s consumes compute %v, want %s", name, r.ConsumedCapacity, compute)
		}
	}
	var reserved []string
	for _, ref := range cl.Status.ReservedFor {
		reserved = append(reserved, ref.Name)
	}
	slices.Sort(reserved)
	slices.Sort(pods)
	if !slices.Equal(reserved, pods) {
		return "", fmt.Errorf("claim %s reserved for %v, want %v", name, reserved, pods)
	}
	if !slices.Contains(cl.Finalizers, resourceapi.Finalizer) {
		return "", fmt.Errorf("claim %s lacks finalizer %s: %v", name, resourceapi.Finalizer, cl.Finalizers)
	}
	return r.Device, nil
}

// TestSchedulerAllocatesClaims, on a real control plane with the DRA API
// of v1.37: this scheduler allocates the ResourceClaims of the pods it
// binds on the GPUs its policy picks, only on nodes that publish Tessera's
// devices, writes allocation, reservedFor and finalizer before binding,
// counts a claim shared by two pods once (in its GPU and in their queue,
// whose limit the claim fills: the second pod joins, a third with a claim
// of its own is held by the limit), waits for a template's claim to be
// made, books what it allocated (a third share finds no room where two
// took the GPUs), and refuses a claim outside Tessera's request policy
// with the field named.
func TestSchedulerAllocatesClaims(t *testing.T) {
	ctx, c, dyn := controlPlaneDyn(t)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "dra", map[string]any{"limit": map[string]any{"gpu": "0.5"}})
	installClasses(ctx, t, c)
	draGPUNode(ctx, t, c, "gpu-0")                                                                                          // publishes its GPUs through DRA
	createGPUNode(ctx, t, c, "plain-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"}) // runs the device plugin only
	claims := c.ResourceV1().ResourceClaims("default")
	for _, cl := range []*resourceapi.ResourceClaim{shareClaim("shared", "0.5", "39Gi", "0.8"), shareClaim("bad", "2", "1Gi", ""), shareClaim("over", "0.5", "1Gi", ""), typoClaim()} {
		if _, err := claims.Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	whole := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "whole", Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassGPU, Count: 1}}}}}}}
	if _, err := c.ResourceV1().ResourceClaimTemplates("default").Create(ctx, whole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer startScheduler(ctx, t, c, dyn, nil)()

	// A 0.5 share with burst 0.8: allocated on the DRA node, then joined.
	claimPod(ctx, t, c, "a", map[string]string{"gpu": "shared"}, nil, inQueue("dra"))
	var sharedDev string
	waitFor(t, "a bound to gpu-0 with claim shared allocated for it", func() error {
		if err := boundTo(ctx, c, "a", "gpu-0"); err != nil {
			return err
		}
		var err error
		sharedDev, err = claimOn(ctx, c, "shared", "gpu-0", "500m", "a")
		return err
	})
	cl, err := claims.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := cl.Status.Allocation.Devices.Config; len(cfg) != 1 || cfg[0].Opaque == nil || cfg[0].Source != resourceapi.AllocationConfigSourceClaim {
		t.Errorf("claim shared: allocation config %+v, want the claim's burst configuration", cfg)
	}
	claimPod(ctx, t, c, "b", map[string]string{"gpu": "shared"}, nil, inQueue("dra"))
	waitFor(t, "b joins claim shared on gpu-0", func() error {
		if err := boundTo(ctx, c, "b", "gpu-0"); err != nil {
			return err
		}
		_, err := claimOn(ctx, c, "shared", "gpu-0", "500m", "a", "b")
		return err
	})
	// The shared claim fills queue dra's limit of 0.5 GPU, once.
	claimPod(ctx, t, c, "over", map[string]string{"gpu": "over"}, nil, inQueue("dra"))
	waitFor(t, "over held by queue dra's limit", func() error {
		return hasCondition(ctx, c, "over", reasonQueueLimit, "queue dra: would use")
	})
	// A claim whose selector names an attribute Tessera's devices do not
	// have is refused with the selector's error when the allocator runs
	// (while gpu-0 has room for it).
	claimPod(ctx, t, c, "typo", map[string]string{"gpu": "typo"}, nil)
	waitFor(t, "typo refused", func() error {
		return hasCondition(ctx, c, "typo", reasonInvalid, "modle")
	})
	if err := c.CoreV1().Pods("default").Delete(ctx, "typo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A template's claim: the pod waits until it is made (here by the test,
	// as kube-controller-manager would), then gets a whole GPU: the one the
	// shared claim leaves.
	pc := claimPod(ctx, t, c, "c", nil, map[string]string{"gpu": "whole"})
	waitFor(t, "c waits for its template's claim", func() error {
		return hasCondition(ctx, c, "c", corev1.PodReasonUnschedulable, "waiting for the ResourceClaim of template whole")
	})
	made := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-gpu", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "c", UID: pc.UID, Controller: ptrTo(true)}}},
		Spec: whole.Spec.Spec}
	if _, err := claims.Create(ctx, made, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scheduler writes c's condition meanwhile: read, set, retry.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.CoreV1().Pods("default").Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("c-gpu")}}
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c bound with its claim on the other GPU", func() error {
		if err := boundTo(ctx, c, "c", "gpu-0"); err != nil {
			return err
		}
		dev, err := claimOn(ctx, c, "c-gpu", "gpu-0", "", "c")
		if err == nil && dev == sharedDev {
			return fmt.Errorf("whole claim c-gpu given %s, which the shared claim holds half of", dev)
		}
		return err
	})

	// What is left on gpu-0 is half of the shared GPU: one more 0.5 share
	// fits, a third does not (plain-0 publishes no DRA devices).
	for _, name := range []string{"half-1", "half-2"} {
		if _, err := claims.Create(ctx, shareClaim(name, "0.5", "39Gi", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		claimPod(ctx, t, c, name, map[string]string{"gpu": name}, nil)
	}
	waitFor(t, "half-1 placed beside the shared claim, half-2 unschedulable", func() error {
		if err := boundTo(ctx, c, "half-1", "gpu-0"); err != nil {
			return err
		}
		if dev, err := claimOn(ctx, c, "half-1", "gpu-0", "500m", "half-1"); err != nil || dev != sharedDev {
			return fmt.Errorf("half-1 on %s (%v), want the shared claim's GPU %s", dev, err, sharedDev)
		}
		return hasCondition(ctx, c, "half-2", corev1.PodReasonUnschedulable, "publishes no DRA devices")
	})

	// A claim outside the request policy is refused, naming the field.
	claimPod(ctx, t, c, "bad", map[string]string{"gpu": "bad"}, nil)
	waitFor(t, "bad refused", func() error {
		return hasCondition(ctx, c, "bad", reasonInvalid, "capacity.requests.compute")
	})
}

// typoClaim asks for a share of a GPU whose "modle" is H100: an attribute
// Tessera's devices do not have.
func typoClaim() *resourceapi.ResourceClaim {
	c := shareClaim("typo", "0.25", "1Gi", "")
	c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["` + kdra.DriverName + `"].modle == "H100"`}}}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// TestSchedulerAllocatesMIGClaims, on a real control plane: a node whose
// one H100 is in MIG mode, managed by Tessera, publishes its GPUNode and
// its MIG devices with their counters (as the agent does with the
// catalog); pods with claims for a 3g.40gb instance are placed by the
// engine's MIG placement and get the MIG device of the instance it chose
// (two fit, at different starts), and a third waits; the claims' share is
// booked as MIG instances.
func TestSchedulerAllocatesMIGClaims(t *testing.T) {
	ctx, c, dyn := controlPlaneDyn(t)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	installClasses(ctx, t, c)
	inv := publishSimulated(ctx, t, c, dyn, "mig-0", "1xH100-SXM", func(inv *inventory.Node) {
		inv.GPUs[0].MIGMode, inv.GPUs[0].MIGManaged, inv.GPUs[0].MIGInstances = inventory.MIGEnabled, true, nil
	})
	res, err := kdra.ResourcesWithMIG(&inv, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{DriverName: kdra.DriverName, KubeClient: c, Owner: kdra.NodeOwner("mig-0"), Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Stop()
	defer startScheduler(ctx, t, c, dyn, nil)()

	forty := func(name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassMIG, Count: 1,
					Selectors: []resourceapi.DeviceSelector{kdra.MIGProfileSelector("3g.40gb")}}}}}}}
	}
	for _, name := range []string{"m-1", "m-2", "m-3"} {
		if _, err := c.ResourceV1().ResourceClaims("default").Create(ctx, forty(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		claimPod(ctx, t, c, name, map[string]string{"gpu": name}, nil)
	}
	devices := map[string]string{}
	waitFor(t, "two 3g.40gb claims allocated on MIG devices of mig-0, a third waiting", func() error {
		for _, name := range []string{"m-1", "m-2"} {
			if err := boundTo(ctx, c, name, "mig-0"); err != nil {
				return err
			}
			cl, err := c.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) != 1 {
				return fmt.Errorf("claim %s not allocated", name)
			}
			devices[name] = cl.Status.Allocation.Devices.Results[0].Device
		}
		return hasCondition(ctx, c, "m-3", corev1.PodReasonUnschedulable, "")
	})
	want := []string{kdra.MIGDeviceName(0, "3g.40gb", 0), kdra.MIGDeviceName(0, "3g.40gb", 4)}
	got := []string{devices["m-1"], devices["m-2"]}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("MIG devices allocated %v, want %v", got, want)
	}

	// A MIG profile asked of the whole-GPU class is refused, saying which
	// class gives MIG instances.
	wrong := forty("wrong")
	wrong.Spec.Devices.Requests[0].Exactly.DeviceClassName = kdra.ClassGPU
	if _, err := c.ResourceV1().ResourceClaims("default").Create(ctx, wrong, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimPod(ctx, t, c, "wrong", map[string]string{"gpu": "wrong"}, nil)
	waitFor(t, "a MIG profile on the whole-GPU class refused", func() error {
		return hasCondition(ctx, c, "wrong", reasonInvalid, "names a MIG profile, but gpu.tessera.io gives GPUs that are not in MIG mode")
	})
}

// TestGangClaimsAllOrNothing, on a real control plane: a gang of two pods
// with claims, whose second member's claim no device can take (its
// selector names a GPU that does not exist), binds neither member and
// allocates neither claim (the claim is allocated inside the cycle's step,
// so the gang's discard gives back the first member's); each says which
// member failed and why.
func TestGangClaimsAllOrNothing(t *testing.T) {
	ctx, c := controlPlane(t)
	installClasses(ctx, t, c)
	draGPUNode(ctx, t, c, "gpu-0")
	nowhere := shareClaim("g-b", "0.5", "1Gi", "")
	nowhere.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["` + kdra.DriverName + `"].uuid == "GPU-none"`}}}
	for _, cl := range []*resourceapi.ResourceClaim{shareClaim("g-a", "0.5", "1Gi", ""), nowhere} {
		if _, err := c.ResourceV1().ResourceClaims("default").Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer startScheduler(ctx, t, c, nil, nil)()
	gang := func(p *corev1.Pod) {
		p.Labels = map[string]string{membership.LabelPodGroup: "pair"}
		p.Annotations = map[string]string{membership.AnnotationMinMember: "2"}
	}
	claimPod(ctx, t, c, "a", map[string]string{"gpu": "g-a"}, nil, gang)
	claimPod(ctx, t, c, "b", map[string]string{"gpu": "g-b"}, nil, gang)
	waitFor(t, "neither member bound, each saying member b's claim fits nowhere", func() error {
		for _, name := range []string{"a", "b"} {
			if err := hasCondition(ctx, c, name, corev1.PodReasonUnschedulable, "(all or nothing); first misfit: default/b: no node fits default/b/claim g-b/gpu"); err != nil {
				return err
			}
		}
		return nil
	})
	for _, name := range []string{"a", "b"} {
		if p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %q (%v), want unbound", name, p.Spec.NodeName, err)
		}
		if cl, err := c.ResourceV1().ResourceClaims("default").Get(ctx, "g-"+name, metav1.GetOptions{}); err != nil || cl.Status.Allocation != nil {
			t.Errorf("claim g-%s allocated (%v), want not", name, err)
		}
	}
}

// TestSchedulerResumesHalfWrittenClaims, on a real control plane: the
// states a scheduler that died in the middle of a binding leaves behind
// are taken up by the next one. A claim with the finalizer but no
// allocation yet is allocated; a claim allocated on gpu-0 and reserved for
// a pod that was never bound pins the pod to gpu-0, which is bound without
// a second reservation or allocation.
func TestSchedulerResumesHalfWrittenClaims(t *testing.T) {
	ctx, c := controlPlane(t)
	installClasses(ctx, t, c)
	draGPUNode(ctx, t, c, "gpu-0")
	draGPUNode(ctx, t, c, "gpu-1")
	claims := c.ResourceV1().ResourceClaims("default")

	// Died after writing the finalizer.
	early := shareClaim("early", "0.5", "1Gi", "")
	early.Finalizers = []string{resourceapi.Finalizer}
	if _, err := claims.Create(ctx, early, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimPod(ctx, t, c, "p-early", map[string]string{"gpu": "early"}, nil)

	// Died after writing the allocation and reservation, before binding.
	late := shareClaim("late", "0.5", "1Gi", "")
	late.Finalizers = []string{resourceapi.Finalizer}
	created, err := claims.Create(ctx, late, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := claimPod(ctx, t, c, "p-late", map[string]string{"gpu": "late"}, nil)
	share := types.UID("0b6f7a3e-2c4d-4e5f-8a9b-1c2d3e4f5a6b")
	created.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: kdra.DriverName, Pool: "gpu-1", Device: kdra.DeviceName(0), ShareID: &share,
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse("500m"), kdra.CapacityMemory: resource.MustParse("1Gi")}}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-1"}}}}}},
	}
	created.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := claims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	defer startScheduler(ctx, t, c, nil, nil)()
	waitFor(t, "both pods bound, p-late on its claim's node", func() error {
		if err := boundTo(ctx, c, "p-late", "gpu-1"); err != nil {
			return err
		}
		p, err := c.CoreV1().Pods("default").Get(ctx, "p-early", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" {
			return fmt.Errorf("p-early not bound (%v)", err)
		}
		_, err = claimOn(ctx, c, "early", p.Spec.NodeName, "500m", "p-early")
		return err
	})
	if _, err := claimOn(ctx, c, "late", "gpu-1", "500m", "p-late"); err != nil {
		t.Errorf("claim late after the new scheduler took it up: %v", err)
	}
	if cl, err := claims.Get(ctx, "late", metav1.GetOptions{}); err != nil || cl.Status.Allocation.Devices.Results[0].Device != kdra.DeviceName(0) {
		t.Errorf("claim late allocated anew: %+v (%v)", cl.Status.Allocation, err)
	}
}
