package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/binding"
)

// bind records the assignment on the pod, then binds it. The annotation
// goes first: a crash between the two leaves an unbound pod whose stale
// annotation the next decision overwrites, never a bound pod without one.
func (s *Scheduler) bind(ctx context.Context, pod *corev1.Pod, a binding.Assignment) error {
	enc, err := binding.Encode(a)
	if err != nil {
		return fmt.Errorf("encode assignment: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{binding.AnnotationKey: enc},
		"resourceVersion": pod.ResourceVersion, // fail if the pod changed since we read it
	}})
	if err != nil {
		return fmt.Errorf("encode annotation patch: %w", err)
	}
	pods := s.cfg.Client.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("record assignment on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: a.Node},
	}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, a.Node, err)
	}
	return nil
}
