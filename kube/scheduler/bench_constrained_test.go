package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The mix's Kubernetes constraints (TESSERA_BENCH_CONSTRAINED=share, default
// 0): that share of the mix's pods outside gangs, drawn with a seed of its
// own (the plan's GPU shapes stay as they are), carries one of three
// constraints kube-scheduler's plugins decide, in turn: required pod
// anti-affinity on the hostname among replicas of one app (four per app),
// a DoNotSchedule topology spread over the nodes' zones among replicas of
// one app, and a PersistentVolumeClaim bound beforehand to a volume of its
// own. Both schedulers get the same constraints; the pods they concern are
// the ones Tessera filters through kube-scheduler's plugins.
const (
	constraintAnti   = "anti-affinity"
	constraintSpread = "spread"
	constraintClaim  = "claim"
	benchZones       = 10
	zoneKey          = "topology.kubernetes.io/zone"
)

// constrain gives share of plan's pods outside gangs a constraint.
func constrain(plan []mixPod, share float64) {
	if share <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := []string{constraintAnti, constraintSpread, constraintClaim}
	n := 0
	for i := range plan {
		if plan[i].gang != "" || rng.Float64() >= share {
			continue
		}
		plan[i].constraint = kinds[n%len(kinds)]
		plan[i].app = fmt.Sprintf("app-%s-%d", plan[i].constraint, n/(4*len(kinds)))
		n++
	}
}

// applyConstraint adds m's constraint to p (pod i of the plan).
func (m mixPod) applyConstraint(p *corev1.Pod, i int) {
	if m.constraint == "" {
		return
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["app"] = m.app
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.app}}
	switch m.constraint {
	case constraintAnti:
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: sel, TopologyKey: "kubernetes.io/hostname"}}}}
	case constraintSpread:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	case constraintClaim:
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(i)}}}}
	}
}

func claimName(i int) string { return fmt.Sprintf("c-%05d", i) }

// createClaims makes, in ns, the bound claim (and its volume) of every pod
// of plan with one, as the PV binder would leave them.
func createClaims(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string, plan []mixPod) {
	var idx []int
	for i, m := range plan {
		if m.constraint == constraintClaim {
			idx = append(idx, i)
		}
	}
	parallel(b, len(idx), func(k int) error {
		i := idx[k]
		name, pvName := claimName(i), fmt.Sprintf("pv-%s-%05d", ns, i)
		class := ""
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pvName}},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: name},
			}}
		pv, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pv.Status.Phase = corev1.VolumeBound
		if _, err := c.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
				VolumeName:       pvName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
		pvc, err = c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pvc.Status.Phase = corev1.ClaimBound
		_, err = c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		return err
	})
}

// benchZone is node i's zone label value.
func benchZone(i int) string { return "z" + strconv.Itoa(i%benchZones) }

// countConstrained is how many of plan's pods carry each constraint.
func countConstrained(plan []mixPod) map[string]int {
	out := map[string]int{}
	for _, m := range plan {
		if m.constraint != "" {
			out[m.constraint]++
		}
	}
	return out
}
