package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

// The volume rows of issue 36's table, on the real control plane with KWOK
// nodes and kube-controller-manager's PersistentVolume binder, as
// kube-scheduler v1.37.2 ends them.
const (
	selectedNodeKey = "volume.kubernetes.io/selected-node"
	provisionerKey  = "volume.kubernetes.io/storage-provisioner"
	testProvisioner = "example.com/test-provisioner"
	csiDriver       = "csi.example.com"
)

// TestVolumeConstraints: claims bound to local volumes on two different
// nodes put each pod on its volume's node; a WaitForFirstConsumer claim
// gets the node Tessera picked (selected-node, VolumeBinding's PreBind),
// the test provisions its volume there as an external provisioner does,
// the PV binder binds it, and only then is the pod bound, on that node; a
// volume in one zone keeps its pod in that zone (VolumeZone); a node whose
// CSI driver attaches one volume takes one of two such pods
// (NodeVolumeLimits).
func TestVolumeConstraints(t *testing.T) {
	ctx, _, cfg := testcluster.ForTestWith(t, true, testcluster.Options{Controllers: []string{testcluster.PVBinderController}})
	client := kubernetes.NewForConfigOrDie(cfg)
	restConfigs.Store(client, cfg)
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	create(ctx, t, client.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait})
	create(ctx, t, client.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "dynamic"},
		Provisioner: testProvisioner, VolumeBindingMode: &wait})
	for i := 1; i <= 3; i++ {
		kfNode(ctx, t, client, fmt.Sprintf("lv-%d", i), "lv", nil, nil)
		kfNode(ctx, t, client, fmt.Sprintf("wf-%d", i), "wf", nil, nil)
		kfNode(ctx, t, client, fmt.Sprintf("vz-%d", i), "vz", map[string]string{zoneLabel: fmt.Sprintf("z%d", i)}, nil)
	}
	kfNode(ctx, t, client, "al-1", "al", nil, nil)
	create(ctx, t, client.StorageV1().CSINodes().Create, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "al-1"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: csiDriver, NodeID: "al-1", Allocatable: &storagev1.VolumeNodeResources{Count: ptrTo(int32(1))}}}}})

	// Claims bound to volumes made beforehand.
	boundVolume(ctx, t, client, "lv-data-a", "local", volumeOn("lv-1"), nil)
	boundVolume(ctx, t, client, "lv-data-b", "local", volumeOn("lv-2"), nil)
	boundVolume(ctx, t, client, "vz-data", "", csiVolume("vz-data"), map[string]string{zoneLabel: "z2"})
	boundVolume(ctx, t, client, "al-data-1", "", csiVolume("al-data-1"), nil)
	boundVolume(ctx, t, client, "al-data-2", "", csiVolume("al-data-2"), nil)
	create(ctx, t, client.CoreV1().PersistentVolumeClaims("default").Create, claimOf("wf-scratch", "dynamic", ""))

	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	withClaim := func(claim string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}
	}
	kfPod(ctx, t, client, "lv-a", "lv", nil, nil, withClaim("lv-data-a"))
	kfPod(ctx, t, client, "lv-b", "lv", nil, nil, withClaim("lv-data-b"))
	kfPod(ctx, t, client, "vz-pod", "vz", nil, nil, withClaim("vz-data"))
	kfPod(ctx, t, client, "al-1", "al", nil, nil, withClaim("al-data-1"))
	kfPod(ctx, t, client, "al-2", "al", nil, nil, withClaim("al-data-2"))
	kfPod(ctx, t, client, "wf-pod", "wf", nil, nil, withClaim("wf-scratch"))

	// The provisioner's part: the claim names its node before the pod is
	// bound; a volume is made there, for the claim.
	var picked string
	waitFor(t, "wf-scratch names the node Tessera picked", func() error {
		c, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "wf-scratch", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if picked = c.Annotations[selectedNodeKey]; picked == "" || c.Annotations[provisionerKey] != testProvisioner {
			return fmt.Errorf("claim annotations %v", c.Annotations)
		}
		p, err := client.CoreV1().Pods("default").Get(ctx, "wf-pod", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("wf-pod bound to %s before its volume was provisioned", p.Spec.NodeName)
		}
		pv := volumeOn(picked)
		pv.Name = "pvc-" + string(c.UID)
		pv.Spec.StorageClassName = "dynamic"
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: c.Name, UID: c.UID}
		pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": testProvisioner}
		_, err = client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		return err
	})

	rows := []struct {
		row     string
		bound   int
		nodes   []string
		pending string
	}{
		{"lv-", 2, []string{"lv-1", "lv-2"}, ""},
		{"wf-", 1, []string{picked}, ""},
		{"vz-", 1, []string{"vz-2"}, ""},
		{"al-", 1, []string{"al-1"}, "NodeVolumeLimits: node(s) exceed max volume count"},
	}
	for _, r := range rows {
		waitFor(t, r.row+" as kube-scheduler ends it", func() error { return rowEnds(ctx, client, r.row, r.bound, r.nodes, r.pending) })
	}
	c, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "wf-scratch", metav1.GetOptions{})
	if err != nil || c.Status.Phase != corev1.ClaimBound {
		t.Errorf("wf-scratch: %v, err %v; want bound", c.Status.Phase, err)
	}
}

const zoneLabel = "topology.kubernetes.io/zone"

func create[T any](ctx context.Context, t *testing.T, fn func(context.Context, T, metav1.CreateOptions) (T, error), obj T) {
	t.Helper()
	if _, err := fn(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// volumeOn: a 10Gi local volume on node.
func volumeOn(node string) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName:       "local",
		VolumeMode:             &fs,
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/tessera-test"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostnameKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}},
	}}
}

// csiVolume: a 10Gi volume of the test CSI driver, attachable anywhere.
func csiVolume(handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: handle}},
	}}
}

func claimOf(name, class, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       volume,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
}

// boundVolume makes claim name and volume pv (of class; labels on the
// volume) bound to each other, and waits until the PV binder says so.
func boundVolume(ctx context.Context, t *testing.T, c kubernetes.Interface, name, class string, pv *corev1.PersistentVolume, labels map[string]string) {
	t.Helper()
	pv.Name, pv.Labels, pv.Spec.StorageClassName = "pv-"+name, labels, class
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: name}
	create(ctx, t, c.CoreV1().PersistentVolumes().Create, pv)
	create(ctx, t, c.CoreV1().PersistentVolumeClaims("default").Create, claimOf(name, class, pv.Name))
	waitFor(t, "claim "+name+" bound", func() error {
		got, err := c.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s: %s", name, got.Status.Phase)
		}
		return nil
	})
}
