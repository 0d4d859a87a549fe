package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// GPUNode is a KWOK node with GPUs, as CreateGPUNode makes it.
type GPUNode struct {
	Name string
	// Model is a catalog name ("A100-80GB"); Count GPUs of it.
	Model string
	Count int
	// Labels and Taints of the Node object.
	Labels map[string]string
	Taints []corev1.Taint
}

// CreateGPUNode creates a KWOK node (32 CPUs, 128Gi, 110 pods, 8 units of
// tessera.io/gpu per GPU) and its GPUNode object as the agent publishes it
// (sharing shared, UUIDs GPU-<name>-<index>). It retries the GPUNode for up
// to a minute while its CRD is not served yet.
func CreateGPUNode(ctx context.Context, core kubernetes.Interface, dyn dynamic.Interface, n GPUNode) error {
	m, err := catalog.Default().Resolve(n.Model)
	if err != nil {
		return fmt.Errorf("GPU node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "tessera.io/gpu": resource.MustParse(fmt.Sprint(8 * n.Count))}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: map[string]string{FakeNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	in := inventory.Node{Name: n.Name, Source: "sim"}
	for i := 0; i < n.Count; i++ {
		in.GPUs = append(in.GPUs, inventory.GPU{UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Index: i, Model: m.Name, Product: m.Name,
			Vendor: string(m.Vendor), MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, NUMANode: -1, Health: inventory.Healthy, MIGMode: inventory.MIGDisabled})
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(in, 8, gpunode.SharingShared), metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("create the GPUNode of %s: %w", n.Name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DecodeManifests decodes every object of a multi-document YAML (or JSON)
// stream, numbers as int64 as the API machinery reads them; empty
// documents are skipped.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", raw, err)
		}
		out = append(out, obj)
	}
}
