package kube

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestAgainstRealAPIServer runs the agent's Kubernetes side against etcd and
// kube-apiserver on loopback.
func TestAgainstRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, _, cfg := testcluster.ForTest(t, false)
	core := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	node := simNode(t, "gpu-node-0")
	if _, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("publish inventory", func(t *testing.T) { testPublish(ctx, t, core, dyn, node) })
	t.Run("read pods bound to the node", func(t *testing.T) { testPods(ctx, t, core, node.Name) })
	t.Run("publish DRA slices", func(t *testing.T) { testSlices(ctx, t, core, dyn, node) })
	t.Run("publish the MIG layout", func(t *testing.T) { testPublishMIG(ctx, t, core, dyn, node) })
	t.Run("publish use", func(t *testing.T) { testPublishUse(ctx, t, core, dyn, node) })
}

// testPublishUse: the UsePublisher installs the GPUUse CRD, creates the
// node's object (owned by the Node) and then patches it; a share gone
// from the records is gone from the object, and figures read back as
// written, simulated ones labelled so.
func testPublishUse(ctx context.Context, t *testing.T, core kubernetes.Interface, dyn dynamic.Interface, node inventory.Node) {
	pub := &UsePublisher{Core: core, Dynamic: dyn, Node: node.Name, InstallCRD: true}
	at := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	busy, mem := int64(420), int64(2048)
	share := func(pod string) gpuuse.Share {
		return gpuuse.Share{Workload: "ml/" + pod, GPU: node.GPUs[0].UUID, Booked: gpuuse.Booked{GuaranteedMilli: 250, LimitMilli: 500, MemoryMiB: 1024, MemoryLimitMiB: 4096},
			Use: gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy, MemoryUsedMiB: &mem, From: at.Add(-10 * time.Second), At: at}}
	}
	status := func(shares ...gpuuse.Share) nodeuse.Status {
		g := gpuuse.GPU{GPU: node.GPUs[0].UUID, Shares: shares}
		g.Sum("no pod holds it")
		return nodeuse.Status{Source: "sim", At: at, Rule: nodeuse.Rule{WindowSeconds: 10, Metered: true}, GPUs: []gpuuse.GPU{g}}
	}
	if err := pub.Publish(ctx, status(share("a"), share("b"))); err != nil {
		t.Fatalf("publish: %v", err)
	}
	want := status(share("b"))
	want.At = at.Add(15 * time.Second)
	if err := pub.Publish(ctx, want); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	obj, err := dyn.Resource(nodeuse.Resource()).Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := nodeuse.FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GPUUse reads back\n%+v\nwant\n%+v", got, want)
	}
	if owners := obj.GetOwnerReferences(); len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != node.Name {
		t.Errorf("owner references = %v, want the Node", owners)
	}
}

// testPublishMIG: the MIG instances the agent publishes after it created
// one for a container reach the GPUNode with their starts and in-use
// flags (the CRD's schema keeps them), and one destroyed is gone at the
// next publish; the scheduler reads them back as published.
func testPublishMIG(ctx context.Context, t *testing.T, core kubernetes.Interface, dyn dynamic.Interface, node inventory.Node) {
	node.GPUs = slices.Clone(node.GPUs)
	g := &node.GPUs[0]
	g.MIGMode, g.MIGManaged = inventory.MIGEnabled, true
	g.MIGInstances = []inventory.MIGInstance{
		{UUID: "MIG-created", Profile: "3g.40gb", MemoryMiB: 40448, Start: inventory.Slot(0), InUse: true},
		{UUID: "MIG-operator", Profile: "1g.10gb", MemoryMiB: 9984, Start: inventory.Slot(6)},
	}
	pub := &Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 16, Sharing: gpunode.SharingShared, InstallCRD: true}
	read := func() []inventory.MIGInstance {
		t.Helper()
		u, err := dyn.Resource(gpunode.Resource()).Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get GPUNode: %v", err)
		}
		n, err := gpunode.FromObject(u)
		if err != nil {
			t.Fatalf("read GPUNode: %v", err)
		}
		gg, ok := n.GPUByIndex(g.Index)
		if !ok {
			t.Fatalf("GPUNode lacks GPU %d", g.Index)
		}
		return gg.MIGInstances
	}
	if err := pub.Publish(ctx, node); err != nil {
		t.Fatalf("publish: %v", err)
	}
	got := read()
	if len(got) != 2 || got[0].UUID != "MIG-created" || !got[0].InUse || got[0].Start == nil || *got[0].Start != 0 || got[1].InUse || got[1].Start == nil || *got[1].Start != 6 {
		t.Errorf("GPUNode instances %+v, want the created 3g.40gb at 0 in use and the operator's 1g.10gb at 6 free", got)
	}
	g.MIGInstances = g.MIGInstances[1:]
	if err := pub.Publish(ctx, node); err != nil {
		t.Fatalf("re-publish: %v", err)
	}
	if got := read(); len(got) != 1 || got[0].UUID != "MIG-operator" {
		t.Errorf("GPUNode instances after the destruction %+v, want the operator's only", got)
	}
}

// testSlices: the GPUNode and the DRA slices published together; a GPU
// turning unhealthy is tainted in the slice at the next publish, and an
// exclusive agent's devices take no shares.
func testSlices(ctx context.Context, t *testing.T, core kubernetes.Interface, dyn dynamic.Interface, node inventory.Node) {
	node.GPUs = slices.Clone(node.GPUs) // earlier subtests turn GPUs unhealthy
	for i := range node.GPUs {
		node.GPUs[i].Health, node.GPUs[i].HealthReason = inventory.Healthy, ""
	}
	sp := &SlicePublisher{Client: core, Sharing: gpunode.SharingShared}
	defer sp.Stop()
	pub := Publishers{&Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 16, Sharing: gpunode.SharingShared}, sp}
	if err := pub.Publish(ctx, node); err != nil {
		t.Fatal(err)
	}
	devices := func(want func([]resourceapi.Device) bool) []resourceapi.Device {
		t.Helper()
		var last []resourceapi.Device
		deadline := time.Now().Add(time.Minute) // liveness bound, not a performance one
		for time.Now().Before(deadline) {
			list, err := core.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
			if err != nil {
				t.Fatal(err)
			}
			last = nil
			for _, sl := range list.Items {
				if sl.Spec.Driver == dra.DriverName {
					last = append(last, sl.Spec.Devices...)
				}
			}
			if want(last) {
				return last
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("slices never showed what was published; last devices %+v", last)
		return nil
	}
	devs := devices(func(d []resourceapi.Device) bool { return len(d) == len(node.GPUs) })
	for i, d := range devs {
		if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || len(d.Taints) != 0 {
			t.Errorf("device %d %+v: a healthy shared GPU takes shares, untainted", i, d)
		}
	}
	sick := node
	sick.GPUs = slices.Clone(node.GPUs)
	sick.GPUs[1].Health, sick.GPUs[1].HealthReason = inventory.Unhealthy, "XID 79"
	if err := pub.Publish(ctx, sick); err != nil {
		t.Fatal(err)
	}
	devices(func(d []resourceapi.Device) bool {
		for _, x := range d {
			if x.Name == dra.DeviceName(sick.GPUs[1].Index) {
				return len(x.Taints) == 1 && x.Taints[0].Key == dra.TaintUnhealthy
			}
		}
		return false
	})
	sp.Sharing = gpunode.SharingExclusive
	if err := sp.Publish(ctx, node); err != nil {
		t.Fatal(err)
	}
	devices(func(d []resourceapi.Device) bool {
		for _, x := range d {
			if x.AllowMultipleAllocations != nil || len(x.Taints) != 0 {
				return false
			}
		}
		return len(d) == len(node.GPUs)
	})

	// With the catalog, a GPU in MIG mode that Tessera manages is its MIG
	// devices (one per profile and start slot), not a whole GPU.
	sp.Sharing, sp.Catalog = gpunode.SharingShared, catalog.Default()
	mig := node
	mig.GPUs = slices.Clone(node.GPUs)
	mig.GPUs[0].MIGMode, mig.GPUs[0].MIGManaged = inventory.MIGEnabled, true
	if err := sp.Publish(ctx, mig); err != nil {
		t.Fatal(err)
	}
	devices(func(d []resourceapi.Device) bool {
		migs := 0
		for _, x := range d {
			if x.Name == dra.DeviceName(mig.GPUs[0].Index) {
				return false
			}
			if strings.HasPrefix(x.Name, dra.DeviceName(mig.GPUs[0].Index)+"-mig-") && len(x.ConsumesCounters) == 1 {
				migs++
			}
		}
		return migs > 0 && len(d) == len(node.GPUs)-1+migs
	})
}

func simNode(t *testing.T, name string) inventory.Node {
	src, err := discovery.Open("sim:4xH100-SXM", catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	n.Name = name
	return n
}

func testPublish(ctx context.Context, t *testing.T, core kubernetes.Interface, dyn dynamic.Interface, node inventory.Node) {
	pub := &Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 16, Sharing: gpunode.SharingShared, InstallCRD: true}
	if err := pub.Publish(ctx, node); err != nil {
		t.Fatalf("publish: %v", err)
	}
	got, err := dyn.Resource(gpunode.Resource()).Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GPUNode: %v", err)
	}
	gpus, _, _ := unstructured.NestedSlice(got.Object, "status", "gpus")
	if len(gpus) != 4 {
		t.Fatalf("GPUNode lists %d GPUs, want 4", len(gpus))
	}
	g0 := gpus[0].(map[string]any)
	for k, want := range map[string]any{"uuid": node.GPUs[0].UUID, "model": node.GPUs[0].Model, "memoryMiB": node.GPUs[0].MemoryMiB, "sharing": "shared", "health": "Healthy"} {
		if g0[k] != want {
			t.Errorf("gpus[0].%s = %v, want %v", k, g0[k], want)
		}
	}
	if owners := got.GetOwnerReferences(); len(owners) != 1 || owners[0].Kind != "Node" {
		t.Errorf("owner references = %v, want the Node", owners)
	}
	n, err := core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := n.Status.Capacity[ResourceGPUMemory]; q.Value() != 4*node.GPUs[0].MemoryMiB<<20 {
		t.Errorf("capacity %s = %s, want 4 GPUs' memory", ResourceGPUMemory, q.String())
	}
	if q := n.Status.Allocatable[ResourceGPUMemory]; q.Value() != 4*node.GPUs[0].MemoryMiB<<20 {
		t.Errorf("allocatable %s = %s, want 4 GPUs' memory", ResourceGPUMemory, q.String())
	}

	// Watchable: a restarted agent (a new Publisher) publishes a health change.
	w, err := dyn.Resource(gpunode.Resource()).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node.Name, ResourceVersion: got.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch GPUNode: %v", err)
	}
	defer w.Stop()
	node.GPUs[2].Health, node.GPUs[2].HealthReason = inventory.Unhealthy, "XID 79: GPU has fallen off the bus"
	// Restarted with --oversubscribe: the GPUNode says so, through the
	// CRD's schema (an unknown field would be pruned).
	again := &Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 16, Sharing: gpunode.SharingShared, Oversubscribe: true, InstallCRD: true}
	if err := again.Publish(ctx, node); err != nil {
		t.Fatalf("re-publish: %v", err)
	}
	var ev watch.Event
	select {
	case ev = <-w.ResultChan():
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	if ev.Type != watch.Modified {
		t.Fatalf("watch event %s, want MODIFIED", ev.Type)
	}
	healthy, _, _ := unstructured.NestedInt64(ev.Object.(*unstructured.Unstructured).Object, "status", "healthyCount")
	if healthy != 3 {
		t.Errorf("healthyCount = %d after GPU 2 fell off the bus, want 3", healthy)
	}
	if before, _, _ := unstructured.NestedBool(got.Object, "status", "memoryOversubscription"); before {
		t.Errorf("status.memoryOversubscription true from an agent without --oversubscribe")
	}
	if after, _, _ := unstructured.NestedBool(ev.Object.(*unstructured.Unstructured).Object, "status", "memoryOversubscription"); !after {
		t.Errorf("status.memoryOversubscription = false after a restart with --oversubscribe: %v", ev.Object.(*unstructured.Unstructured).Object["status"])
	}
	n, _ = core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if q := n.Status.Allocatable[ResourceGPUMemory]; q.Value() != 3*node.GPUs[0].MemoryMiB<<20 {
		t.Errorf("allocatable %s = %s, want 3 healthy GPUs' memory", ResourceGPUMemory, q.String())
	}
	list, err := dyn.Resource(gpunode.Resource()).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("GPUNodes after re-publish: %v, %v; want exactly one", len(list.Items), err)
	}
}

func testPods(ctx context.Context, t *testing.T, core kubernetes.Interface, nodeName string) {
	mk := func(name, node string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{binding.AnnotationKey: `{"v":1}`}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}}}},
		}
		if _, err := core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	mk("here", nodeName)
	mk("there", "other-node")
	pods := Pods{Client: core, Node: nodeName}
	on, err := pods.OnNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(on) != 1 || on[0].Name != "here" || on[0].Containers[0].Devices != 2 || on[0].Assignment != `{"v":1}` || on[0].UID == "" {
		t.Errorf("pods on node = %+v, want only pod here with 2 devices and its annotation", on)
	}
	if _, found, err := pods.Pod(ctx, "default", "gone"); found || err != nil {
		t.Errorf("Pod(gone) = found %v, err %v; want not found, no error", found, err)
	}
}
