package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/podstatus"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// allocatedClaim is a claim of one request allocated on node: one device
// of driver per entry of devices, consuming compute where given (else the
// whole device).
func allocatedClaim(name, node, driver string, devices map[string]string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassGPU}}}}}}
	if devices == nil {
		return c
	}
	a := &resourceapi.AllocationResult{}
	for dev, compute := range devices {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: dev}
		if compute != "" {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse(compute)}
		}
		a.Devices.Results = append(a.Devices.Results, r)
	}
	c.Status.Allocation = a
	return c
}

// TestSnapshotBooksAllocatedClaims: the allocated claims of Tessera's
// driver take their GPUs' shares on the snapshot, each claim once; claims
// of other drivers and claims not allocated take nothing; a claim let go
// frees its GPU again.
func TestSnapshotBooksAllocatedClaims(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gpu := func(i int) inventory.GPU {
		return inventory.GPU{UUID: fmt.Sprintf("GPU-%d", i), Index: i, Model: "H100", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy}
	}
	inv := fixedInventory{inventory.Node{CPUMilli: 64000, MemoryMiB: 262144, GPUs: []inventory.GPU{gpu(0), gpu(1), gpu(2)}}}
	nodes := []*corev1.Node{labelNode("n0", "3", "H100")}
	whole := allocatedClaim("whole", "n0", kdra.DriverName, map[string]string{"gpu-0": ""})
	half := allocatedClaim("half", "n0", kdra.DriverName, map[string]string{"gpu-1": "500m"})
	other := allocatedClaim("other", "n0", "gpu.example.com", map[string]string{"gpu-2": ""})
	pending := allocatedClaim("pending", "n0", kdra.DriverName, nil)
	s := &Scheduler{cfg: Config{Catalog: catalog.Default(), Name: DefaultName, Log: log}}
	free := func(snap *snapshot) [3]int64 {
		var out [3]int64
		for i, g := range snap.cluster.Nodes[0].GPUs {
			out[i] = g.FreeMilli
		}
		return out
	}
	snap := s.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{whole, half, other, pending})
	if got, want := free(snap), [3]int64{0, 500, 1000}; got != want || snap.claims.Len() != 2 {
		t.Fatalf("free compute %v with %d claims booked, want %v with 2", got, snap.claims.Len(), want)
	}
	snap = s.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{pending, other, half, whole})
	if free(snap) != [3]int64{0, 500, 1000} || snap.claims.Len() != 2 {
		t.Errorf("the same claims in another order: free %v, %d claims", free(snap), snap.claims.Len())
	}
	let := half.DeepCopy()
	let.ResourceVersion, let.Status.Allocation = "2", nil
	snap = s.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{whole, let})
	if got, want := free(snap), [3]int64{0, 1000, 1000}; got != want || snap.claims.Len() != 1 {
		t.Errorf("after the half claim was let go: free %v with %d claims, want %v with 1", got, snap.claims.Len(), want)
	}
}

// TestClaimsAndPodsShareOneInventory, on a real control plane: a GPU held
// by an allocated DRA claim of Tessera's driver (as kube-scheduler's DRA
// plugin writes it) is not given to a pod this scheduler binds, and is
// given once the claim goes.
func TestClaimsAndPodsShareOneInventory(t *testing.T) {
	ctx, c := controlPlane(t)
	createGPUNode(ctx, t, c, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	claim := allocatedClaim("held", "gpu-0", kdra.DriverName, map[string]string{"gpu-0": ""})
	status := claim.Status
	claim.UID, claim.ResourceVersion, claim.Status = "", "", resourceapi.ResourceClaimStatus{}
	created, err := c.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = status
	if _, err := c.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write the claim's allocation: %v", err)
	}
	defer startScheduler(ctx, t, c, nil, nil)()
	createPod(ctx, t, c, "first", "1", nil)
	waitFor(t, "first bound to the GPU the claim leaves", func() error { return onGPU(ctx, c, "first", 1) })
	createPod(ctx, t, c, "second", "1", nil)
	waitFor(t, "second unschedulable while the claim holds GPU 0", func() error {
		return hasCondition(ctx, c, "second", corev1.PodReasonUnschedulable, "")
	})
	if err := c.ResourceV1().ResourceClaims("default").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second bound to GPU 0 once the claim is gone", func() error { return onGPU(ctx, c, "second", 0) })
}

// onGPU checks that pod name is bound with one GPU share, on GPU index.
func onGPU(ctx context.Context, c kubernetes.Interface, name string, index int) error {
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName == "" {
		return fmt.Errorf("pod %s not bound", name)
	}
	a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
	if err != nil {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	if len(a.Containers) != 1 || len(a.Containers[0].GPUs) != 1 || a.Containers[0].GPUs[0].Index != index {
		return fmt.Errorf("pod %s assigned %+v, want GPU %d", name, a.Containers, index)
	}
	return nil
}

// TestQueuesChargeClaimsOnce: an allocated claim's GPU share is charged to
// the queue of the first booked pod it is reserved for, once however many
// pods share it; when that pod goes, the next one's queue is charged; a
// claim no booked pod holds is charged to no queue.
func TestQueuesChargeClaimsOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gpu := func(i int) inventory.GPU {
		return inventory.GPU{UUID: fmt.Sprintf("GPU-%d", i), Index: i, Model: "H100", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy}
	}
	inv := fixedInventory{inventory.Node{CPUMilli: 64000, MemoryMiB: 262144, GPUs: []inventory.GPU{gpu(0), gpu(1), gpu(2)}}}
	nodes := []*corev1.Node{labelNode("n0", "3", "H100")}
	bound := func(name, queue string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Labels: map[string]string{queues.LabelQueue: queue}},
			Spec: corev1.PodSpec{NodeName: "n0", SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	}
	reserve := func(c *resourceapi.ResourceClaim, pods ...string) *resourceapi.ResourceClaim {
		for _, p := range pods {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
		}
		return c
	}
	a, b, c := bound("a", "ml"), bound("b", "ops"), bound("c", "ops")
	claims := []*resourceapi.ResourceClaim{
		reserve(allocatedClaim("half", "n0", kdra.DriverName, map[string]string{"gpu-0": "500m"}), "a", "b"),
		reserve(allocatedClaim("whole", "n0", kdra.DriverName, map[string]string{"gpu-1": ""}), "c"),
		reserve(allocatedClaim("orphan", "n0", kdra.DriverName, map[string]string{"gpu-2": "250m"}), "gone"),
	}
	s := &Scheduler{cfg: Config{Catalog: catalog.Default(), Name: DefaultName, Log: log}}
	gpuMilli := func(u map[string]queueing.Resources) map[string]int64 {
		out := map[string]int64{}
		for q, r := range u {
			out[q] = r.GPUMilli
		}
		return out
	}

	snap := s.syncTo(inv, nodes, []*corev1.Pod{a, b, c}, claims)
	if got, want := gpuMilli(snap.books.Usage()), map[string]int64{"ml": 500, "ops": 1000}; !maps.Equal(got, want) {
		t.Errorf("GPU compute charged %v, want %v (the shared half once, to a's queue; the orphan to none)", got, want)
	}
	if got := snap.books.Usage()["ops"].CPUMilli; got != 2000 {
		t.Errorf("queue ops CPU %d milli, want 2000 (b and c's own requests)", got)
	}
	// a goes; kube-controller-manager drops it from the claim.
	claims[0] = reserve(allocatedClaim("half", "n0", kdra.DriverName, map[string]string{"gpu-0": "500m"}), "b")
	claims[0].ResourceVersion = "2"
	snap = s.syncTo(inv, nodes, []*corev1.Pod{b, c}, claims)
	if got, want := gpuMilli(snap.books.Usage()), map[string]int64{"ops": 1500}; !maps.Equal(got, want) {
		t.Errorf("after a goes: GPU compute charged %v, want %v", got, want)
	}
}

// TestPreemptionFreesAPodsOwnClaim: a claim only one pod holds goes with
// the pod, so preemption may evict the pod for the claim's GPU; a claim
// two pods share is no one pod's, and evicting one frees nothing.
func TestPreemptionFreesAPodsOwnClaim(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := fixedInventory{inventory.Node{CPUMilli: 64000, MemoryMiB: 262144, GPUs: []inventory.GPU{
		{UUID: "GPU-0", Index: 0, Model: "H100", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy}}}}
	node := labelNode("n0", "1", "H100")
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	nodes := []*corev1.Node{node}
	bound := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "n0", SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	}
	claim := func(pods ...string) *resourceapi.ResourceClaim {
		c := allocatedClaim("held", "n0", kdra.DriverName, map[string]string{"gpu-0": ""})
		for _, p := range pods {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
		}
		return c
	}
	def, err := placement.New(placement.DefaultPolicy, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{cfg: Config{Catalog: catalog.Default(), Name: DefaultName, Log: log}, policy: def}
	tree, err := queueing.NewTree(nil)
	if err != nil {
		t.Fatal(err)
	}
	high := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "high", Namespace: "default", UID: "uid-high"},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Priority: ptrTo(int32(100)), Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}
	victims := func(pods []*corev1.Pod, c *resourceapi.ResourceClaim) []string {
		t.Helper()
		s.snap = nil
		snap := s.syncTo(inv, nodes, pods, []*resourceapi.ResourceClaim{c})
		wl, _, err := s.workloadOf(snap, high)
		if err != nil {
			t.Fatal(err)
		}
		gangs := map[string]dispatch.GangSpec{}
		s.runningGangs(snap, gangs)
		running := snap.books.Running()
		outs, err := cycle.Run(cycle.Snapshot{Cluster: snap.cluster, Policy: s.policy, Queues: tree, Usage: snap.books.Usage(),
			Capacity: snap.capacity, Gangs: cycleGangs(gangs), Pending: []cycle.Workload{wl}, Running: running, Preemption: &cycle.Preemption{Now: time.Now()}})
		if err != nil || len(outs) != 1 {
			t.Fatalf("cycle: %v %+v", err, outs)
		}
		if outs[0].Status != cycle.NoFit {
			t.Fatalf("high: %v, want no fit while the claim holds the only GPU", outs[0].Status)
		}
		var ids []string
		for _, v := range outs[0].Victims {
			ids = append(ids, v.ID)
		}
		return ids
	}
	if got := victims([]*corev1.Pod{bound("low")}, claim("low")); !slices.Equal(got, []string{"default/low"}) {
		t.Errorf("claim held by low alone: victims %v, want [default/low]", got)
	}
	if got := victims([]*corev1.Pod{bound("low"), bound("low-2")}, claim("low", "low-2")); len(got) != 0 {
		t.Errorf("claim shared by low and low-2: victims %v, want none (evicting one frees nothing)", got)
	}
}

// TestSnapshotBooksMIGClaims: a claim allocated on a MIG device of a
// managed GPU books the instance it stands for (the engine then places
// nothing over its memory slices); without a catalog to read it, the
// claim is left out.
func TestSnapshotBooksMIGClaims(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := fixedInventory{inventory.Node{CPUMilli: 64000, MemoryMiB: 262144, GPUs: []inventory.GPU{{UUID: "GPU-m", Index: 0, Model: "H100-SXM",
		MemoryMiB: 81559, NUMANode: -1, Health: inventory.Healthy, MIGMode: inventory.MIGEnabled, MIGManaged: true}}}}
	nodes := []*corev1.Node{labelNode("n0", "1", "H100-SXM")}
	claim := allocatedClaim("mig", "n0", kdra.DriverName, map[string]string{kdra.MIGDeviceName(0, "3g.40gb", 4): ""})
	s := &Scheduler{cfg: Config{Catalog: catalog.Default(), Name: DefaultName, Log: log}}
	snap := s.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{claim})
	if snap.claims.Len() != 1 {
		t.Fatalf("%d claims booked, want the MIG claim", snap.claims.Len())
	}
	got := snap.cluster.Nodes[0].GPUs[0].MIG.Instances
	if len(got) != 1 || got[0].Profile != "3g.40gb" || got[0].Start != 4 || !got[0].InUse {
		t.Errorf("MIG instances on the snapshot %+v, want the claim's 3g.40gb at 4, in use", got)
	}
	none := &Scheduler{cfg: Config{Name: DefaultName, Log: log}}
	if snap := none.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{claim}); snap.claims.Len() != 0 {
		t.Errorf("without a catalog %d claims booked, want none", snap.claims.Len())
	}
}

// TestClaimVersionsAreTakenIn: a claim's newer version that books the
// same (a finalizer added) keeps its booking; one reserved for a pod now
// is charged to that pod's queue; a newly allocated claim is booked, and
// one that no longer fits is booked all the same (saturating: the GPU
// shows no room).
func TestClaimVersionsAreTakenIn(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv := fixedInventory{inventory.Node{CPUMilli: 64000, MemoryMiB: 262144, GPUs: []inventory.GPU{
		{UUID: "GPU-0", Index: 0, Model: "H100", MemoryMiB: 81920, NUMANode: -1, Health: inventory.Healthy}}}}
	nodes := []*corev1.Node{labelNode("n0", "1", "H100")}
	half := allocatedClaim("half", "n0", kdra.DriverName, map[string]string{"gpu-0": "500m"})
	s := &Scheduler{cfg: Config{Catalog: catalog.Default(), Name: DefaultName, Log: log}}
	version := func(rv string, edit func(*resourceapi.ResourceClaim)) []*resourceapi.ResourceClaim {
		v := half.DeepCopy()
		v.ResourceVersion = rv
		edit(v)
		return []*resourceapi.ResourceClaim{v}
	}
	free := func(snap *snapshot) int64 { return snap.cluster.Nodes[0].GPUs[0].FreeMilli }
	s.syncTo(inv, nodes, nil, []*resourceapi.ResourceClaim{half})
	snap := s.syncTo(inv, nodes, nil, version("2", func(v *resourceapi.ResourceClaim) { v.Finalizers = []string{resourceapi.Finalizer} }))
	if free(snap) != 500 || snap.claims.Len() != 1 {
		t.Errorf("a version with only a finalizer added: free %d, %d claims; want 500, 1", free(snap), snap.claims.Len())
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", Labels: map[string]string{queues.LabelQueue: "ml"}},
		Spec: corev1.PodSpec{NodeName: "n0", SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main"}}}}
	now := version("3", func(v *resourceapi.ResourceClaim) {
		v.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}}
	})
	snap = s.syncTo(inv, nodes, []*corev1.Pod{p}, now)
	if got := snap.books.Usage()["ml"].GPUMilli; got != 500 {
		t.Errorf("a version reserved for p: queue ml charged %d milli, want 500", got)
	}
	second := allocatedClaim("second", "n0", kdra.DriverName, map[string]string{"gpu-0": "500m"})
	snap = s.syncTo(inv, nodes, []*corev1.Pod{p}, append(now, second))
	if snap.claims.Len() != 2 || free(snap) != 0 {
		t.Errorf("a second half: %d claims, %d free; want 2, 0", snap.claims.Len(), free(snap))
	}
	third := allocatedClaim("third", "n0", kdra.DriverName, map[string]string{"gpu-0": "500m"})
	snap = s.syncTo(inv, nodes, []*corev1.Pod{p}, append(now, second, third))
	if snap.claims.Len() != 3 || free(snap) != 0 {
		t.Errorf("a third half on a full GPU: %d claims, %d free; want all 3 booked, 0 free", snap.claims.Len(), free(snap))
	}
}

// syncTo brings s's snapshot to nodes, pods and claims as a cycle does,
// every node looked at.
func (s *Scheduler) syncTo(src nodeinventory.Source, nodes []*corev1.Node, pods []*corev1.Pod, claims []*resourceapi.ResourceClaim) *snapshot {
	s.cfg.Inventory = src
	if s.snap == nil {
		b := booked.New()
		if s.core != nil {
			b = s.core.Books() // the books its cycles run on
		}
		s.snap = newSnapshot(b, s.cfg.Catalog, s.cfg.Log)
	}
	if s.events == nil {
		s.events = podstatus.New(fake.NewClientset(), fake.NewClientset(), DefaultName, s.cfg.Log)
	}
	s.takeNodes(s.snap, nodes)
	s.takeListed(s.snap, pods)
	s.snap.claims.Sync(claims)
	return s.snap
}
