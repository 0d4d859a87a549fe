package scheduler

import (
	"fmt"

	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestPreemption: a high-priority pod that fits nowhere evicts the
// lowest-priority pod it needs to, the victim gets an event saying why,
// and the high-priority pod is then bound; equal priority never preempts.
func TestPreemption(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	for name, value := range map[string]int32{"low": 10, "mid": 20, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name, class string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, PriorityClassName: class, Containers: []corev1.Container{{
				Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}},
			}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("victim-low", "low")
	create("keeper-mid", "mid")
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "both bound", func() error { return countBound(ctx, client, "victim-low", 1) })
	waitFor(t, "both bound", func() error { return countBound(ctx, client, "keeper-mid", 1) })
	create("peer-mid", "mid") // same priority as keeper, above victim
	waitFor(t, "peer-mid bound after evicting victim-low", func() error { return countBound(ctx, client, "peer-mid", 1) })
	if _, err := client.CoreV1().Pods("default").Get(ctx, "victim-low", metav1.GetOptions{}); err == nil {
		t.Fatal("victim-low still exists")
	}
	waitFor(t, "victim event", func() error {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=victim-low"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Preempted" && strings.Contains(e.Message, "Preempted by default/peer-mid (priority 20)") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Preempted", len(evs.Items))
	})
	create("other-mid", "mid") // equal priority to both bound pods: must wait, not preempt
	waitFor(t, "other-mid stays pending", func() error {
		return hasCondition(ctx, client, "other-mid", corev1.PodReasonUnschedulable, "no node fits")
	})
	if err := countBound(ctx, client, "keeper-mid", 1); err != nil {
		t.Fatal(err)
	}
	if err := countBound(ctx, client, "peer-mid", 1); err != nil {
		t.Fatal(err)
	}
}

// TestReclaimBetweenQueues: a queue that borrowed idle capacity gives it
// back when a queue below its guarantee needs it, whatever the priorities.
func TestReclaimBetweenQueues(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]map[string]any{
		"owner":    {"guaranteed": map[string]any{"gpu": "1"}},
		"borrower": {},
	} {
		createQueue(ctx, t, dyn, name, spec)
	}
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	createPodWith(ctx, t, client, "borrow-0", "1", map[string]string{queues.LabelQueue: "borrower"}, nil)
	createPodWith(ctx, t, client, "borrow-1", "1", map[string]string{queues.LabelQueue: "borrower"}, nil)
	waitFor(t, "borrower uses the whole node", func() error { return countBound(ctx, client, "borrow-", 2) })
	createPodWith(ctx, t, client, "own-0", "1", map[string]string{queues.LabelQueue: "owner"}, nil)
	waitFor(t, "owner reclaims its guaranteed GPU", func() error { return countBound(ctx, client, "own-0", 1) })
	waitFor(t, "one borrower pod evicted", func() error { return countBound(ctx, client, "borrow-", 1) })
	evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if e.Reason == "Preempted" && strings.Contains(e.Message, "of queue owner, which is below its guaranteed share") {
			found = true
		}
	}
	if !found {
		t.Error("no reclaim event on the evicted pod")
	}
	// The owner at its guarantee reclaims no more.
	createPodWith(ctx, t, client, "own-1", "1", map[string]string{queues.LabelQueue: "owner"}, nil)
	waitFor(t, "owner beyond its guarantee waits", func() error {
		return hasCondition(ctx, client, "own-1", corev1.PodReasonUnschedulable, "no node fits")
	})
	if err := countBound(ctx, client, "borrow-", 1); err != nil {
		t.Fatal(err)
	}
}

// TestGangPreemption: a high-priority gang of two one-GPU pods that fits
// nowhere stops the low-priority pods on two nodes (each victim told which
// node it frees), and is then bound whole.
func TestGangPreemption(t *testing.T) {
	ctx, client := controlPlane(t)
	for _, n := range []string{"gpu-0", "gpu-1"} {
		createGPUNode(ctx, t, client, n, map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "1"})
	}
	for name, value := range map[string]int32{"low": 10, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name, class string, labels, ann map[string]string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, PriorityClassName: class, Containers: []corev1.Container{{
				Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}},
			}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("low-a", "low", nil, nil)
	create("low-b", "low", nil, nil)
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "low pods bound", func() error { return countBound(ctx, client, "low-", 2) })
	for i := range 2 {
		create(fmt.Sprintf("gang-%d", i), "high", map[string]string{membership.LabelPodGroup: "g"}, map[string]string{membership.AnnotationMinMember: "2"})
	}
	waitFor(t, "the gang bound after both low pods are stopped", func() error { return countBound(ctx, client, "gang-", 2) })
	for _, victim := range []string{"low-a", "low-b"} {
		if _, err := client.CoreV1().Pods("default").Get(ctx, victim, metav1.GetOptions{}); err == nil {
			t.Errorf("%s still exists", victim)
		}
		waitFor(t, victim+" told why", func() error {
			evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + victim})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == "Preempted" && strings.Contains(e.Message, "Preempted by default/gang-0 (priority 1000) to free GPU shares on node gpu-") {
					return nil
				}
			}
			return fmt.Errorf("%d events, none Preempted by the gang", len(evs.Items))
		})
	}
}
