package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// publishGPUNode creates a KWOK node and the GPUNode its agent would
// publish: one H100, memory oversubscribed or not (--oversubscribe).
func publishGPUNode(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, name string, oversubscribe bool) inventory.Node {
	t.Helper()
	return publishSimulated(ctx, t, client, dyn, name, "1xH100", func(inv *inventory.Node) { inv.MemoryOversubscription = oversubscribe })
}

// publishSimulated creates a KWOK node and the GPUNode its agent would
// publish for the simulated source spec ("1xH100-SXM"), after edit.
func publishSimulated(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, name, spec string, edit func(*inventory.Node)) inventory.Node {
	t.Helper()
	createGPUNode(ctx, t, client, name, nil)
	sim, err := simulated.FromSpec(spec, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := sim.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv := nodes[0]
	inv.Name = name
	edit(&inv)
	if _, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(inv, 16, gpunode.SharingShared), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return inv
}

// nvsharePod is a pod as nvshare documents it (nvshare.com/gpu: 1 in the
// container's limits), with Tessera's schedulerName and no webhook.
func nvsharePod(name string) *corev1.Pod {
	p := gpuPod(name, nil, nil, nil)
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{workload.NvshareResourceGPU: resource.MustParse("1")}
	return p
}

// TestNvshareOnRealControlPlane: pods written as nvshare documents them
// wait, with a condition and an event saying why, while no node's agent
// oversubscribes memory; once an oversubscribing node's GPUNode appears,
// ten of them share its one GPU (nvshare's ten virtual GPUs), each with a
// tenth guaranteed and the whole card's compute and memory as its limit,
// and the eleventh waits.
func TestNvshareOnRealControlPlane(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	publishGPUNode(ctx, t, client, dyn, "plain-0", false)
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	for i := 0; i < 11; i++ {
		mustCreatePod(ctx, t, client, nvsharePod(fmt.Sprintf("nv-%02d", i)))
	}
	const why = `1 node: agent does not oversubscribe GPU memory (tessera agent --oversubscribe), which the pod asks for (nvshare.com/gpu, or tessera.io/oversubscribe: "true")`
	waitFor(t, "nvshare pods wait for an oversubscribing node", func() error {
		if err := hasCondition(ctx, client, "nv-00", corev1.PodReasonUnschedulable, "no node fits 1 GPU(s) at compute 100/1000 for default/nv-00/main: "+why); err != nil {
			return err
		}
		return hasEvent(ctx, client, "nv-00", corev1.EventTypeWarning, "FailedScheduling", why)
	})
	if err := countBound(ctx, client, "nv-", 0); err != nil {
		t.Fatal(err)
	}

	inv := publishGPUNode(ctx, t, client, dyn, "oversub-0", true)
	waitFor(t, "ten nvshare pods share the oversubscribing node's GPU", func() error { return countBound(ctx, client, "nv-", 10) })
	mem := inv.GPUs[0].MemoryMiB
	want := binding.Share{UUID: inv.GPUs[0].UUID, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryMiB: mem / 10, MemoryLimitMiB: mem}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var waiting string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			waiting = p.Name
			continue
		}
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if p.Spec.NodeName != "oversub-0" || len(a.Containers) != 1 || len(a.Containers[0].GPUs) != 1 || a.Containers[0].GPUs[0] != want {
			t.Errorf("pod %s on %s got %+v, want one share %+v on oversub-0", p.Name, p.Spec.NodeName, a.Containers, want)
		}
	}
	if waiting == "" {
		t.Fatal("no nvshare pod left waiting")
	}
	// Its message now names both nodes: the full GPU, and the node that
	// does not oversubscribe.
	waitFor(t, "the eleventh waits, saying why", func() error {
		if err := hasCondition(ctx, client, waiting, corev1.PodReasonUnschedulable, why); err != nil {
			return err
		}
		p, err := client.CoreV1().Pods("default").Get(ctx, waiting, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Count(c.Message, "1 node: ") == 2 {
				return nil
			}
		}
		return fmt.Errorf("pod %s: conditions %+v do not name both nodes", waiting, p.Status.Conditions)
	})
	time.Sleep(time.Second) // a few more cycles: nothing else may be bound
	if err := countBound(ctx, client, "nv-", 10); err != nil {
		t.Fatal(err)
	}
}
