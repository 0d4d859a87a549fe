package nodeinventory

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
)

func labelNode(name string, gpus string, model string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelModel: model, LabelCount: gpus}}, Status: corev1.NodeStatus{Allocatable: res}}
}

func TestLabelInventoryErrors(t *testing.T) {
	inv := Labels{Catalog: catalogtest.Small()}
	for _, tc := range []struct {
		node *corev1.Node
		want string
	}{
		{labelNode("n", "2", ""), "label tessera.io/gpu-model must name the GPU model"},
		{labelNode("n", "2", "H9000"), `label tessera.io/gpu-model: unknown GPU model "H9000"`},
		{labelNode("n", "1.5", "H200"), `label tessera.io/gpu-count must be a whole number in [0, 64], got "1.5"`},
		{labelNode("n", "65", "H200"), `label tessera.io/gpu-count must be a whole number in [0, 64], got "65"`},
	} {
		if _, err := inv.Node(tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Node: %v, want %q", err, tc.want)
		}
	}
	n := labelNode("n", "0", "")
	delete(n.Labels, LabelCount)
	if got, err := inv.Node(n); err != nil || len(got.GPUs) != 0 || got.CPUMilli != 8000 || got.Pods != 0 {
		t.Errorf("CPU-only node: %+v, %v; want 8000m CPU, no pod limit", got, err)
	}
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	if got, err := inv.Node(n); err != nil || got.Pods != 110 {
		t.Errorf("node allowing 110 pods: %+v, %v", got, err)
	}
}
