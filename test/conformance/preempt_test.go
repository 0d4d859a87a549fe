package conformance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The preemption rows' PriorityClasses, made once for both runs.
const (
	lowPriority  = "conformance-low"
	highPriority = "conformance-high"
	// gone is the result of a pod that was listed no more: a preemption
	// victim, deleted by the scheduler that preempted it.
	gone = "evicted (deleted)"
)

func priorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: lowPriority}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: highPriority}, Value: 2000},
	}
}

func priorityClass(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = name }
}

// running is a low-priority pod of the run already on node (made with
// spec.nodeName, so it holds its room before the run's high-priority pod
// comes: the two schedulers' informers deliver pods in the order made).
func running(row, name, node string, opts ...func(*corev1.Pod)) *corev1.Pod {
	return pod(row, name, append(opts, priorityClass(lowPriority), func(p *corev1.Pod) { p.Spec.NodeName = node })...)
}

// preemptionRows: a high-priority pod refused by one constraint that a
// low-priority pod's eviction lifts (kube-scheduler's DefaultPreemption
// evicts it, and binds the pod once it is gone), and one whose constraint
// that eviction would break (it evicts nothing). Each node holds only its
// row's pods, so the victims are decided: byPod.
func preemptionRows() []row {
	oneCPU := corev1.ResourceList{corev1.ResourceCPU: q("1")}
	port := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9090, HostPort: 9090, Protocol: corev1.ProtocolTCP}}
	}
	return []row{
		// Evicting the small pod alone frees too little: the big one is
		// the only victim set of one pod (kube-scheduler reprieves the
		// small one whichever it tries first).
		{name: "pe", what: "DefaultPreemption: a node's CPU full of low-priority pods (700m, 300m); a high-priority pod of 600m fits once the 700m one is evicted",
			nodes: []node{{name: "pe-1", alloc: oneCPU}}, preempts: true,
			pods: []*corev1.Pod{
				running("pe", "pe-low-big", "pe-1", cpu("700m")), running("pe", "pe-low-small", "pe-1", cpu("300m")),
				pod("pe", "pe-high", cpu("600m"), priorityClass(highPriority)),
			}, compare: byPod, check: ends(map[string]bool{"pe-high": true, "pe-low-small": true})},
		{name: "ph", what: "DefaultPreemption with NodePorts: a high-priority pod refused its only node for hostPort 9090 a low-priority pod holds",
			nodes: nodes("ph", 1), preempts: true,
			pods: []*corev1.Pod{
				running("ph", "ph-low", "ph-1", port),
				pod("ph", "ph-high", port, priorityClass(highPriority)),
			}, compare: byPod, check: ends(map[string]bool{"ph-high": true})},
		// Evicting pi-db frees the CPU but breaks the affinity: no node
		// is a candidate, nothing is evicted.
		{name: "pi", what: "DefaultPreemption with InterPodAffinity: a high-priority pod's required affinity is met only by the low-priority pod taking the CPU it needs",
			nodes: []node{{name: "pi-1", alloc: oneCPU}}, preempts: true,
			pods: []*corev1.Pod{
				running("pi", "pi-db", "pi-1", cpu("1"), labels("app", "pi-db")),
				pod("pi", "pi-client", cpu("1"), podAffinity(false, "pi-db"), priorityClass(highPriority)),
			}, compare: byPod, check: ends(map[string]bool{"pi-db": true, "pi-client": false})},
	}
}

// ends is a row check: each named pod ends bound (true) or not (false).
func ends(bound map[string]bool) func(context.Context, kubernetes.Interface, outcome) error {
	return func(_ context.Context, _ kubernetes.Interface, o outcome) error {
		for p, want := range bound {
			if got := o[p].node != ""; got != want {
				return fmt.Errorf("pod %s bound %t, want %t (%s)", p, got, want, describe(o))
			}
		}
		return nil
	}
}
