package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestPreemptionUnderPlugins: preemption knows kube-scheduler's plugins.
// A high-priority pod refused a node only for a host port a low-priority
// pod holds evicts that pod and is bound there (the port is a rejection
// eviction resolves, so the node is looked at, and the plugins' dry run
// passes it with the victim gone). A high-priority pod short of CPU on
// the one node where its required affinity is met would free the CPU by
// evicting the very pod its affinity needs: nothing is evicted, and it
// waits.
func TestPreemptionUnderPlugins(t *testing.T) {
	ctx, client := controlPlane(t)
	for name, value := range map[string]int32{"low": 10, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kfNode(ctx, t, client, "pp-1", "pp", nil, nil)
	kfNode(ctx, t, client, "pa-1", "pa", nil, nil)
	port := func(s *corev1.PodSpec) {
		s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	priority := func(class string, then ...func(*corev1.PodSpec)) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.PriorityClassName = class
			for _, f := range then {
				f(s)
			}
		}
	}
	cpu := func(q string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
		}
	}
	var cycles atomic.Int64
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.CycleDone = func(CycleStats) { cycles.Add(1) } })
	defer stop()

	kfPod(ctx, t, client, "pp-low", "pp", nil, nil, priority("low", port))
	kfPod(ctx, t, client, "pa-db", "pa", map[string]string{"app": "pa-db"}, nil, priority("low", cpu("7500m")))
	waitFor(t, "the low-priority pods bound", func() error {
		return rowEnds(ctx, client, "p", 2, []string{"pa-1", "pp-1"}, "")
	})

	kfPod(ctx, t, client, "pp-high", "pp", nil, nil, priority("high", port))
	kfPod(ctx, t, client, "pa-client", "pa", nil, nil, priority("high", cpu("1"), func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pa-db"}}, TopologyKey: hostnameKey}}}}
	}))
	waitFor(t, "pp-high bound on pp-1 in pp-low's place", func() error {
		if err := gone(ctx, client, "pp-low"); err != nil {
			return err
		}
		return rowEnds(ctx, client, "pp-", 1, []string{"pp-1"}, "")
	})
	waitFor(t, "pa-client waits", func() error {
		return hasCondition(ctx, client, "pa-client", corev1.PodReasonUnschedulable, "insufficient CPU")
	})
	// Ten more cycles: pa-db is never evicted for pa-client.
	seen := cycles.Load()
	waitFor(t, "ten more scheduling cycles", func() error {
		if n := cycles.Load() - seen; n < 10 {
			return fmt.Errorf("%d cycles", n)
		}
		return nil
	})
	if err := rowEnds(ctx, client, "pa-", 1, []string{"pa-1"}, "insufficient CPU"); err != nil {
		t.Error(err)
	}
	if err := gone(ctx, client, "pa-db"); err == nil {
		t.Error("pa-db was evicted for a pod whose affinity it alone met")
	}
}

// gone is nil once pod name is deleted.
func gone(ctx context.Context, c kubernetes.Interface, name string) error {
	if _, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
		return fmt.Errorf("pod %s still exists", name)
	}
	return nil
}
