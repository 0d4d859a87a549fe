package e2enode_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimMounted: a half-GPU pod with a PersistentVolumeClaim of a
// WaitForFirstConsumer class, whose only volume is a local one on the real
// node. Tessera's pick binds the claim to it (VolumeBinding's PreBind, the
// PV binder finishing), the kubelet mounts it, and the probe reads the
// file the test left there.
func claimMounted(t *testing.T, n *node, uuid string) {
	dir := filepath.Join(n.rn.Root, "volumes", "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const marker = "written on the host before the pod ran"
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	fs := corev1.PersistentVolumeFilesystem
	class := "e2e-local"
	objs := []func() error{
		func() error {
			_, err := n.cs.StorageV1().StorageClasses().Create(n.ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
				Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := n.cs.CoreV1().PersistentVolumes().Create(n.ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "e2e-data"},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName:       class,
					VolumeMode:             &fs,
					PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{n.rn.Name}}},
					}}}},
				}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := n.cs.CoreV1().PersistentVolumeClaims("default").Create(n.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "e2e-data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &class,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	p := half(n, "with-claim")
	p.Spec.NodeSelector = nil // the volume decides the node (the KWOK node has GPUs too)
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "e2e-data"}}}}
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	c.Env = append(c.Env, corev1.EnvVar{Name: "PROBE_READ", Value: "/data/marker"})
	n.create(p)
	env := n.running("with-claim")
	if got := env["probe.read"]; got != marker {
		t.Errorf("with-claim read %q from its volume, want %q", got, marker)
	}
	checkHandoff(t, "with-claim", env, uuid, "500m")
	got, err := n.cs.CoreV1().PersistentVolumeClaims("default").Get(n.ctx, "e2e-data", metav1.GetOptions{})
	if err != nil || got.Spec.VolumeName != "e2e-data" {
		t.Errorf("claim e2e-data: volume %q, err %v; want e2e-data", got.Spec.VolumeName, err)
	}
	n.deletePod("with-claim")
}
