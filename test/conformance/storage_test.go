package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

// The volume rows' storage: two WaitForFirstConsumer classes, local
// volumes (no provisioner) and dynamic ones the test provisions as an
// external provisioner would, and volumes of a CSI driver no node runs
// (its attach limit is a CSINode's).
const (
	localClass      = "conformance-local"
	dynamicClass    = "conformance-dynamic"
	testProvisioner = "example.com/conformance-provisioner"
	csiDriver       = "csi.conformance.example.com"
	selectedNodeKey = "volume.kubernetes.io/selected-node"
)

func storageClasses() []*storagev1.StorageClass {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	return []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: localClass}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait},
		{ObjectMeta: metav1.ObjectMeta{Name: dynamicClass}, Provisioner: testProvisioner, VolumeBindingMode: &wait},
	}
}

// localVolume is a 10Gi local volume of the local class on node, named
// name.
func localVolume(name, node string) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: q("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName:       localClass,
		VolumeMode:             &fs,
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/conformance"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostnameKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}},
	}}
}

// csiVolume is a 10Gi volume of the test CSI driver, named name, attachable
// on any node, labelled with labels.
func csiVolume(name string, mode corev1.PersistentVolumeAccessMode, labels map[string]string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: q("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{mode},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: name}},
	}}
}

// claim is a 1Gi claim of class ("" for none), bound beforehand to volume
// when volume is set (the PV binder binds the two before the run's pods
// come, as it would have long before).
func claim(name, class string, mode corev1.PersistentVolumeAccessMode, volume *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q("1Gi")}},
		}}
	if volume != nil {
		volume.Spec.StorageClassName = class
		volume.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: name}
		c.Spec.VolumeName = volume.Name
	}
	return c
}

func withClaim(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

// claimEnds is a row check: the run ends with the claim bound, to volume
// when set, and, when pod is set, on the node the scheduler picked for
// that pod (the claim's selected-node is the pod's node).
func claimEnds(name, volume, pod string) func(context.Context, kubernetes.Interface, outcome) error {
	return func(ctx context.Context, c kubernetes.Interface, o outcome) error {
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound || (volume != "" && got.Spec.VolumeName != volume) {
			return fmt.Errorf("claim %s %s to volume %q, want bound to %q", name, got.Status.Phase, got.Spec.VolumeName, volume)
		}
		if sel := got.Annotations[selectedNodeKey]; pod != "" && sel != o[pod].node {
			return fmt.Errorf("claim %s selected node %q, pod %s on %q", name, sel, pod, o[pod].node)
		}
		return nil
	}
}

// createStorage makes the rows' volumes and claims for the run of sched
// (labelled with it, so that deleteRun finds them) and waits until the
// claims that name their volume are bound.
func createStorage(ctx context.Context, t *testing.T, c kubernetes.Interface, rs []row, sched string) {
	t.Helper()
	var prebound []string
	for _, r := range rs {
		for _, v := range r.volumes {
			v = v.DeepCopy()
			v.Labels = withRun(v.Labels, sched)
			if _, err := c.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}); err != nil {
				t.Fatalf("row %s: %v", r.name, err)
			}
		}
		for _, cl := range r.claims {
			cl = cl.DeepCopy()
			cl.Labels = withRun(cl.Labels, sched)
			if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, cl, metav1.CreateOptions{}); err != nil {
				t.Fatalf("row %s: %v", r.name, err)
			}
			if cl.Spec.VolumeName != "" {
				prebound = append(prebound, cl.Name)
			}
		}
	}
	testcluster.Eventually(t, sched+"'s prebound claims bound", time.Minute, func() error {
		for _, name := range prebound {
			got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != corev1.ClaimBound {
				return fmt.Errorf("claim %s %s", name, got.Status.Phase)
			}
		}
		return nil
	})
}

func withRun(l map[string]string, sched string) map[string]string {
	out := map[string]string{runLabel: sched}
	maps.Copy(out, l)
	return out
}

// deleteStorage deletes sched's claims and volumes and waits until they
// are gone. No controller here removes the protection finalizers (the
// claims' pods are gone already), so deleteStorage does.
func deleteStorage(ctx context.Context, t *testing.T, c kubernetes.Interface, sched string) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: runLabel + "=" + sched}
	claims, volumes := c.CoreV1().PersistentVolumeClaims(ns), c.CoreV1().PersistentVolumes()
	if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	if err := volumes.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	unprotect := []byte(`{"metadata":{"finalizers":null}}`)
	testcluster.Eventually(t, sched+"'s claims and volumes gone", time.Minute, func() error {
		cl, err := claims.List(ctx, sel)
		if err != nil {
			return err
		}
		pv, err := volumes.List(ctx, sel)
		if err != nil {
			return err
		}
		var errs []error
		for _, o := range cl.Items {
			if _, err := claims.Patch(ctx, o.Name, types.MergePatchType, unprotect, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		for _, o := range pv.Items {
			if _, err := volumes.Patch(ctx, o.Name, types.MergePatchType, unprotect, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		if n := len(cl.Items) + len(pv.Items); n > 0 {
			errs = append(errs, fmt.Errorf("%d claims and %d volumes left", len(cl.Items), len(pv.Items)))
		}
		return errors.Join(errs...)
	})
}

// provision plays the dynamic class's external provisioner until ctx
// ends: for each claim of the class that names the node its pod's
// scheduler picked (selected-node, set in VolumeBinding's PreBind) and
// has no volume yet, it makes a local volume there for that claim,
// labelled with the claim's run; the PV binder binds the two.
func provision(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		claims, err := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: runLabel})
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("provisioner: list claims: %v", err)
			}
			continue
		}
		for _, cl := range claims.Items {
			node := cl.Annotations[selectedNodeKey]
			if cl.Spec.StorageClassName == nil || *cl.Spec.StorageClassName != dynamicClass || node == "" || cl.Spec.VolumeName != "" || cl.DeletionTimestamp != nil {
				continue
			}
			pv := localVolume("pvc-"+string(cl.UID), node)
			pv.Labels = map[string]string{runLabel: cl.Labels[runLabel]}
			pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": testProvisioner}
			pv.Spec.StorageClassName = dynamicClass
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: cl.Name, UID: cl.UID}
			if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				t.Logf("provisioner: claim %s: %v", cl.Name, err)
			}
		}
	}
}

// csiNode is the CSINode publishing n's attach limit for the test CSI
// driver, nil when it has none.
func (n node) csiNode() *storagev1.CSINode {
	if n.attachLimit == 0 {
		return nil
	}
	limit := n.attachLimit
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: csiDriver, NodeID: n.name, Allocatable: &storagev1.VolumeNodeResources{Count: &limit}}}}}
}
