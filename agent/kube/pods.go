package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/binding"
)

// Pods reads the pods bound to one node from the API server.
type Pods struct {
	Client kubernetes.Interface
	Node   string
}

// Pod returns one pod; found is false when it does not exist.
func (p Pods) Pod(ctx context.Context, namespace, name string) (pod handoff.Pod, found bool, err error) {
	obj, err := p.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return handoff.Pod{}, false, nil
	}
	if err != nil {
		return handoff.Pod{}, false, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	return FromAPI(obj), true, nil
}

// OnNode returns the pods bound to the node.
func (p Pods) OnNode(ctx context.Context) ([]handoff.Pod, error) {
	list, err := p.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", p.Node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", p.Node, err)
	}
	out := make([]handoff.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, FromAPI(&list.Items[i]))
	}
	return out, nil
}

// FromAPI returns what the handoff needs of a pod: its Tessera device
// requests in kubelet's allocation order and its assignment annotation.
func FromAPI(pod *corev1.Pod) handoff.Pod {
	p := handoff.Pod{
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		Created: pod.CreationTimestamp.Time, HostIPC: pod.Spec.HostIPC,
		Terminal: pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
	}
	p.Assignment, p.HasAssignment = pod.Annotations[binding.AnnotationKey]
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if n := devices(c); n > 0 {
				p.Containers = append(p.Containers, handoff.ContainerRequest{Name: c.Name, Devices: n})
			}
		}
	}
	return p
}

func devices(c corev1.Container) int {
	q, ok := c.Resources.Limits[corev1.ResourceName(ResourceGPU)]
	if !ok {
		q, ok = c.Resources.Requests[corev1.ResourceName(ResourceGPU)]
	}
	if !ok {
		return 0
	}
	return int(q.Value())
}

// EnvOf returns the value each of a pod's containers sets env to (only
// literal values; a container that does not set it is absent); found is
// false when the pod does not exist.
func (p Pods) EnvOf(ctx context.Context, namespace, name, env string) (values map[string]string, found bool, err error) {
	obj, err := p.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	values = map[string]string{}
	for _, list := range [][]corev1.Container{obj.Spec.InitContainers, obj.Spec.Containers} {
		for _, c := range list {
			for _, e := range c.Env {
				if e.Name == env && e.ValueFrom == nil {
					values[c.Name] = e.Value
				}
			}
		}
	}
	return values, true, nil
}
