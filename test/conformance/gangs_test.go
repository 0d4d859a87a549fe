package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

// workloadGate serves Kubernetes' Workload API (PodGroups of
// scheduling.k8s.io/v1beta1, pods' spec.schedulingGroup) and turns on
// kube-scheduler v1.37.2's pod group cycle and GangScheduling plugin.
const workloadGate = "GenericWorkload=true"

// podGroup is a Workload API PodGroup with the gang policy of minCount.
func podGroup(name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
}

func inGroup(group string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group} }
}

// gangRows: a gang of a CPU-only pod, a pod with a claim bound to a local
// volume on the node, and a pod asking a GPU share too (the oracle's copy
// asks its CPU alone), all or nothing; on a node with CPU for 2, and on
// one with room for all.
func gangRows() []row {
	rwo := corev1.ReadWriteOnce
	gang := func(name string, nodeAlloc corev1.ResourceList) row {
		group := name + "-gang"
		vol := localVolume("pv-"+name+"-data", name+"-1")
		return row{name: name, nodes: []node{{name: name + "-1", gpus: 2, alloc: nodeAlloc}},
			groups:  []*schedulingv1beta1.PodGroup{podGroup(group, 3)},
			volumes: []*corev1.PersistentVolume{vol},
			claims:  []*corev1.PersistentVolumeClaim{claim(name+"-data", localClass, rwo, vol)},
			pods: []*corev1.Pod{
				pod(name, name+"-cpu", cpu("1"), inGroup(group)),
				pod(name, name+"-vol", cpu("1"), withClaim(name+"-data"), inGroup(group)),
				pod(name, name+"-gpu", cpu("1"), gpuShare("0.5"), inGroup(group)),
			}, compare: byPod}
	}
	short := gang("gn", corev1.ResourceList{corev1.ResourceCPU: q("2")})
	short.what = "GangScheduling (Workload API PodGroup, minCount 3): CPU-only, local-volume and GPU-share members, 1 CPU each, on a node with 2 CPUs: none bind"
	short.check = ends(map[string]bool{"gn-cpu": false, "gn-vol": false, "gn-gpu": false})
	whole := gang("ga", nil)
	whole.what = "GangScheduling (Workload API PodGroup, minCount 3): CPU-only, local-volume and GPU-share members, all fit: all bind"
	whole.check = ends(map[string]bool{"ga-cpu": true, "ga-vol": true, "ga-gpu": true})
	return []row{short, whole}
}

// createGroups makes the rows' PodGroups for the run of sched, labelled
// with it, so that deleteGroups finds them.
func createGroups(ctx context.Context, t *testing.T, c kubernetes.Interface, rs []row, sched string) {
	t.Helper()
	for _, r := range rs {
		for _, g := range r.groups {
			g = g.DeepCopy()
			g.Labels = withRun(g.Labels, sched)
			if _, err := c.SchedulingV1beta1().PodGroups(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
				t.Fatalf("row %s: %v", r.name, err)
			}
		}
	}
}

// deleteGroups deletes sched's PodGroups and waits until they are gone
// (their finalizers, if any, removed as deleteStorage removes the
// claims': their pods are gone already).
func deleteGroups(ctx context.Context, t *testing.T, c kubernetes.Interface, sched string) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: runLabel + "=" + sched}
	groups := c.SchedulingV1beta1().PodGroups(ns)
	if err := groups.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, sched+"'s PodGroups gone", time.Minute, func() error {
		l, err := groups.List(ctx, sel)
		if err != nil {
			return err
		}
		var errs []error
		for _, g := range l.Items {
			if _, err := groups.Patch(ctx, g.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		if n := len(l.Items); n > 0 {
			errs = append(errs, fmt.Errorf("%d PodGroups left", n))
		}
		return errors.Join(errs...)
	})
}
