package scheduler

import (
	"fmt"

	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestSchedulerOnRealControlPlane runs the scheduler against etcd,
// kube-apiserver and KWOK: fractional pods pack onto fake GPU nodes with
// their assignment recorded, bad requests and impossible requests stay
// pending with a condition and an event, and a restarted scheduler books
// nothing twice.
func TestSchedulerOnRealControlPlane(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, true)
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	// gpu-0 is described by labels only; gpu-1 by a GPUNode object, as the
	// agent publishes it (real UUIDs).
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", nil)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	sim, err := simulated.FromSpec("2xH100", catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	simNodes, _ := sim.Discover(ctx)
	inv := simNodes[0]
	inv.Name = "gpu-1"
	if _, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(inv, 16, gpunode.SharingShared), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{"gpu-0/gpu0": "gpu-0", "gpu-0/gpu1": "gpu-0"}
	for _, g := range inv.GPUs {
		nodeOf[g.UUID] = "gpu-1"
	}
	waitFor(t, "nodes Ready", func() error {
		for i := 0; i < 2; i++ {
			n, err := client.CoreV1().Nodes().Get(ctx, fmt.Sprintf("gpu-%d", i), metav1.GetOptions{})
			if err != nil || !ready(n) {
				return fmt.Errorf("node gpu-%d not ready (%v)", i, err)
			}
		}
		return nil
	})

	reg := prometheus.NewRegistry()
	stop := startScheduler(ctx, t, client, dyn, reg)
	for i := 0; i < 12; i++ {
		createPod(ctx, t, client, fmt.Sprintf("frac-%02d", i), "1", map[string]string{workload.AnnotationCompute: "0.25"})
	}
	createPod(ctx, t, client, "bad-fraction", "1", map[string]string{workload.AnnotationCompute: "1.5"})
	createPod(ctx, t, client, "too-big", "3", nil)

	waitFor(t, "12 fractional pods bound", func() error { return countBound(ctx, client, "frac-", 12) })
	waitFor(t, "bad request reported", func() error {
		return hasCondition(ctx, client, "bad-fraction", reasonInvalid, "annotation tessera.io/gpu-fraction of container main: must be a share in (0, 1]")
	})
	waitFor(t, "impossible request reported", func() error {
		return hasCondition(ctx, client, "too-big", corev1.PodReasonUnschedulable, "no node fits 3 GPU(s)")
	})
	waitFor(t, "warning event for the bad request", func() error {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-fraction"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "tessera.io/gpu-fraction") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none a warning about tessera.io/gpu-fraction", len(evs.Items))
	})
	checkNoOverbooking(ctx, t, client, nodeOf)
	if got := decisions(t, reg, "bound"); got != 12 {
		t.Errorf("decisions_total{result=bound} = %v, want 12", got)
	}
	if got := decisions(t, reg, "invalid"); got < 1 {
		t.Errorf("decisions_total{result=invalid} = %v, want >= 1", got)
	}

	// Restart: pods created while no scheduler runs are placed by a new one
	// that rebuilt its view from the API only.
	stop()
	for i := 12; i < 20; i++ {
		createPod(ctx, t, client, fmt.Sprintf("frac-%02d", i), "1", map[string]string{workload.AnnotationCompute: "0.25"})
	}
	stop = startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "16 fractional pods bound after restart", func() error { return countBound(ctx, client, "frac-", 16) })
	time.Sleep(2 * time.Second) // a few more cycles: nothing else may be bound
	if err := countBound(ctx, client, "frac-", 16); err != nil {
		t.Fatal(err)
	}
	checkNoOverbooking(ctx, t, client, nodeOf)
}

// decisions reads tessera_scheduler_decisions_total{result=...} from reg.
func decisions(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return counter(t, reg, "tessera_scheduler_decisions_total", result)
}
