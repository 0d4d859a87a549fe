package scheduler

import (
	"fmt"

	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestReservationStopsBackfillThatWouldDelayABigPod: a two-GPU pod blocked
// behind a running pod reserves the node; a one-GPU pod that would take the
// free GPU (and delay it) waits instead; when the running pod ends the big
// pod gets the node.
func TestReservationStopsBackfillThatWouldDelayABigPod(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()
	createPod(ctx, t, client, "running", "1", nil)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running", 1) })
	createPod(ctx, t, client, "big", "2", nil)
	waitFor(t, "big blocked", func() error {
		return hasCondition(ctx, client, "big", corev1.PodReasonUnschedulable, "no node fits 2 GPU(s)")
	})
	time.Sleep(time.Second) // a few cycles: the reservation is made
	createPod(ctx, t, client, "small", "1", nil)
	waitFor(t, "small may not backfill", func() error {
		return hasCondition(ctx, client, "small", corev1.PodReasonUnschedulable, "reserved for a pod waiting longer")
	})
	if err := client.CoreV1().Pods("default").Delete(ctx, "running", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "big gets the node", func() error { return countBound(ctx, client, "big", 1) })
	if err := countBound(ctx, client, "small", 0); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillElsewhereIsAllowed: with a node reserved, a small pod still
// runs on another node. Model constraints make the layout deterministic:
// only gpu-0 (two H100s) can ever take the H100 pods.
func TestBackfillElsewhereIsAllowed(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", map[string]string{nodeinventory.LabelModel: "L4", nodeinventory.LabelCount: "1"})
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()
	h100 := map[string]string{workload.AnnotationModel: "H100"}
	createPod(ctx, t, client, "running", "1", h100)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running", 1) })
	createPod(ctx, t, client, "big", "2", h100)
	waitFor(t, "big blocked", func() error {
		return hasCondition(ctx, client, "big", corev1.PodReasonUnschedulable, "no node fits 2 GPU(s)")
	})
	time.Sleep(time.Second)
	createPod(ctx, t, client, "small", "1", nil)
	waitFor(t, "small backfills on gpu-1", func() error {
		p, err := client.CoreV1().Pods("default").Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "gpu-1" {
			return fmt.Errorf("small on %q", p.Spec.NodeName)
		}
		return nil
	})
}

// TestGangReservesNodes: a gang of two 2-GPU members, blocked by two 1-GPU
// pods (wherever they run, at most one member fits), reserves both nodes; a
// 1-GPU pod that would take a free GPU waits instead, and the gang binds
// once the running pods end.
func TestGangReservesNodes(t *testing.T) {
	ctx, client := controlPlane(t)
	for _, n := range []string{"gpu-0", "gpu-1"} {
		createGPUNode(ctx, t, client, n, map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	}
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()
	createPod(ctx, t, client, "running-0", "1", nil)
	createPod(ctx, t, client, "running-1", "1", nil)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running-", 2) })
	for i := 0; i < 2; i++ {
		createPodWith(ctx, t, client, fmt.Sprintf("gang-%d", i), "2", map[string]string{membership.LabelPodGroup: "train"}, map[string]string{membership.AnnotationMinMember: "2"})
	}
	waitFor(t, "gang blocked", func() error {
		return hasCondition(ctx, client, "gang-0", corev1.PodReasonUnschedulable, "gang default/train: only ")
	})
	time.Sleep(time.Second) // a few cycles: the reservation is made
	createPod(ctx, t, client, "small", "1", nil)
	waitFor(t, "small may not backfill", func() error {
		return hasCondition(ctx, client, "small", corev1.PodReasonUnschedulable, "reserved for gang default/train waiting longer")
	})
	for _, name := range []string{"running-0", "running-1"} {
		if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "gang gets both nodes", func() error { return countBound(ctx, client, "gang-", 2) })
	if err := countBound(ctx, client, "small", 0); err != nil {
		t.Fatal(err)
	}
}
