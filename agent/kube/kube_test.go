package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/binding"
)

func TestFromAPIListsTesseraContainersInKubeletOrder(t *testing.T) {
	gpu := func(n int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", Annotations: map[string]string{binding.AnnotationKey: "{}"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Resources: gpu(1)}},
			Containers:     []corev1.Container{{Name: "plain"}, {Name: "b", Resources: gpu(2)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	p := FromAPI(pod)
	if len(p.Containers) != 2 || p.Containers[0] != (handoff.ContainerRequest{Name: "init", Devices: 1}) || p.Containers[1] != (handoff.ContainerRequest{Name: "b", Devices: 2}) {
		t.Errorf("containers = %+v", p.Containers)
	}
	if !p.HasAssignment || p.Assignment != "{}" || !p.Terminal || p.UID != "u1" || p.HostIPC {
		t.Errorf("pod = %+v", p)
	}
	pod.Spec.HostIPC = true
	if !FromAPI(pod).HostIPC {
		t.Error("spec.hostIPC true: HostIPC false")
	}
}
