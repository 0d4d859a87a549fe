package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/queues"
)

// TestIdleReclaimOnControlPlane: on a real API server, a notebook of a
// queue that reclaims idle holders after an hour, running for three hours,
// holds the only GPU and a batch pod waits. While the notebook's agent publishes it idle for 30
// minutes, the batch pod is tried and left waiting and the notebook kept;
// once the agent publishes it idle for two hours, the notebook is deleted
// with an event saying why and the batch pod binds. The scheduling core
// runs on a clock the test moves (Config.Clock); the agent's GPUUse is
// written on it.
func TestIdleReclaimOnControlPlane(t *testing.T) {
	ctx, client := controlPlane(t)
	dyn := dynamicFor(t, client)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	if err := nodeuse.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "notebooks", map[string]any{"idleReclaimAfter": "1h"})
	createQueue(ctx, t, dyn, "batch", map[string]any{})
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "1"})
	createPodWith(ctx, t, client, "notebook", "1", map[string]string{queues.LabelQueue: "notebooks"}, nil)
	clk := clocktesting.NewFakeClock(time.Now()) // the scheduling core's
	stop := startScheduler(ctx, t, client, dyn, nil, func(c *Config) { c.Clock = clk })
	defer stop()
	waitFor(t, "notebook bound", func() error { return countBound(ctx, client, "notebook", 1) })
	nb, err := client.CoreV1().Pods("default").Get(ctx, "notebook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := binding.Decode(nb.Annotations[binding.AnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	sh := a.Containers[0].GPUs[0]
	clk.Step(3 * time.Hour) // the notebook has run three hours
	// publish writes the node's GPUUse as its agent would, the notebook
	// idle since idleFor ago.
	var rv string
	publish := func(idleFor time.Duration) {
		t.Helper()
		now := clk.Now()
		busy := int64(0)
		use := gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy, From: now.Add(-10 * time.Second), At: now}
		st := nodeuse.Status{Source: "sim", At: now, Rule: nodeuse.Rule{WindowSeconds: 10, IdleBelowMilli: 50, IdleAfterSeconds: 600, Metered: true},
			GPUs: []gpuuse.GPU{{GPU: sh.UUID, Index: sh.Index, Use: use, Shares: []gpuuse.Share{{Workload: "default/notebook", GPU: sh.UUID, Index: sh.Index,
				Booked: gpuuse.Booked{GuaranteedMilli: sh.ComputeMilli, LimitMilli: sh.ComputeLimitMilli}, Use: use, Idle: &gpuuse.Idle{Since: now.Add(-idleFor)}}}}}}
		obj, err := nodeuse.Object("gpu-0", st)
		if err != nil {
			t.Fatal(err)
		}
		r := dyn.Resource(nodeuse.Resource())
		if rv == "" {
			got, err := r.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = got.GetResourceVersion()
			return
		}
		obj.SetResourceVersion(rv)
		got, err := r.Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv = got.GetResourceVersion()
	}
	publish(30 * time.Minute)
	createPodWith(ctx, t, client, "batch", "1", map[string]string{queues.LabelQueue: "batch"}, nil)
	waitFor(t, "batch tried and left waiting", func() error {
		return hasCondition(ctx, client, "batch", corev1.PodReasonUnschedulable, "")
	})
	if _, err := client.CoreV1().Pods("default").Get(ctx, "notebook", metav1.GetOptions{}); err != nil {
		t.Fatalf("the notebook, idle 30 minutes of the hour its queue allows, was evicted: %v", err)
	}
	publish(2 * time.Hour)
	waitFor(t, "batch bound once the notebook was reclaimed", func() error {
		clk.Step(time.Second) // the batch pod's backoffs end on the core's clock
		return countBound(ctx, client, "batch", 1)
	})
	if _, err := client.CoreV1().Pods("default").Get(ctx, "notebook", metav1.GetOptions{}); err == nil {
		t.Fatal("the notebook still exists")
	}
	waitFor(t, "the notebook's event", func() error {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=notebook"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Preempted" && strings.Contains(e.Message, "held its GPUs idle longer than its queue notebooks reclaims idle holders after") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none saying the notebook was reclaimed idle", len(evs.Items))
	})
}
