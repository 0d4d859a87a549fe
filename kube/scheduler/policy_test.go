package scheduler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestPolicyPerPod: the cluster policy spreads, but a pod naming binpack
// packs beside the first pod (spread would take the empty node), and an
// unknown name leaves the pod pending with a message naming the annotation
// and the allowed values.
func TestPolicyPerPod(t *testing.T) {
	ctx, client := controlPlane(t)
	for _, n := range []string{"gpu-0", "gpu-1"} {
		createGPUNode(ctx, t, client, n, map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	}
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.Policy = "spread" })
	defer stop()
	nodeOf := func(name string) string {
		t.Helper()
		var node string
		waitFor(t, name+" bound", func() error {
			if err := countBound(ctx, client, name, 1); err != nil {
				return err
			}
			p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			node = p.Spec.NodeName
			return err
		})
		return node
	}
	createPod(ctx, t, client, "first", "1", nil)
	first := nodeOf("first")
	createPod(ctx, t, client, "packed", "1", map[string]string{workload.AnnotationPolicy: "binpack"})
	if got := nodeOf("packed"); got != first {
		t.Errorf("pod asking for binpack went to %s, want %s beside the first pod", got, first)
	}
	createPod(ctx, t, client, "bad", "1", map[string]string{workload.AnnotationPolicy: "best"})
	waitFor(t, "bad policy reported", func() error {
		return hasCondition(ctx, client, "bad", reasonInvalid, `annotation tessera.io/placement-policy: must be one of random, dotproduct, gpuclustering, gpupacking, bestfit, spread, fgd, fgd-online, tessera, tessera-online, got "best"`)
	})
}
