package scheduler

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/crd"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestEveryPendingPodSaysWhy: no pod that names Tessera stays pending
// without a PodScheduled=False condition and a Warning FailedScheduling
// event that say why. One pod (or gang) per way of not being bound, on a
// real control plane, without the admission webhook: an invalid request,
// keys of other systems the webhook would refuse (GPU, queue and gang
// keys), nvshare without an oversubscribing node, no fit, an unknown
// queue, a queue limit, a gang waiting for members, a gang whose minimum
// does not fit, gang members that disagree, a missing Volcano PodGroup, a
// node reserved for a pod waiting longer, and a binding the API server
// refuses. Each pod then keeps both while it is retried and backed off.
func TestEveryPendingPodSaysWhy(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := crd.Install(ctx, dyn, []byte(volcanoPodGroupCRD)); err != nil {
		t.Fatal(err)
	}
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "capped", map[string]any{"limit": map[string]any{"gpu": "1"}})
	// gpu-0 takes the H100 pods, gpu-1 the L4 ones (the reservation).
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", map[string]string{nodeinventory.LabelModel: "L4", nodeinventory.LabelCount: "2"})
	denyBindings(ctx, t, client, "unbindable")
	stop := startScheduler(ctx, t, client, dyn, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()

	h100 := map[string]string{workload.AnnotationModel: "H100"}
	l4 := map[string]string{workload.AnnotationModel: "L4"}
	// A pod binds on gpu-1 and a two-GPU pod waits behind it: it reserves
	// the node (the reservation case below).
	createPod(ctx, t, client, "running", "1", l4)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running", 1) })
	createPod(ctx, t, client, "blocked", "2", l4)
	waitFor(t, "blocked waits", func() error {
		return hasCondition(ctx, client, "blocked", corev1.PodReasonUnschedulable, "no node fits 2 GPU(s)")
	})
	time.Sleep(time.Second) // a few cycles: the reservation is made

	with := func(p *corev1.Pod, labels, ann map[string]string) *corev1.Pod {
		p.Labels, p.Annotations = labels, ann
		return p
	}
	resources := func(p *corev1.Pod, kv ...string) *corev1.Pod {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		p.Spec.Containers[0].Resources.Limits = l
		return p
	}
	tessera := func(name, gpus string, labels, ann map[string]string) *corev1.Pod {
		return with(resources(gpuPod(name, nil, nil, nil), workload.ResourceGPU, gpus), labels, ann)
	}
	group := func(name string) map[string]string { return map[string]string{membership.LabelPodGroup: name} }
	minMember := func(n string, more map[string]string) map[string]string {
		out := map[string]string{membership.AnnotationMinMember: n}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name   string
		pods   []*corev1.Pod // the first is checked
		reason string
		msg    string
	}{
		{"invalid request", []*corev1.Pod{tessera("bad-fraction", "1", nil, map[string]string{workload.AnnotationCompute: "1.5"})},
			reasonInvalid, "annotation tessera.io/gpu-fraction of container main: must be a share in (0, 1]"},
		{"a GPU key the webhook refuses", []*corev1.Pod{with(gpuPod("hami-uuid", nil, nil, nil), nil, map[string]string{workload.HAMiAnnotationUseUUID: "GPU-AAA"})},
			reasonInvalid, "annotation nvidia.com/use-gpuuuid: Tessera does not pin pods to (or away from) GPU UUIDs"},
		{"nvshare with a count the webhook refuses", []*corev1.Pod{resources(gpuPod("nvshare-two", nil, nil, nil), workload.NvshareResourceGPU, "2")},
			reasonInvalid, "resource nvshare.com/gpu of container main: must be 1, got 2"},
		{"a gang key the webhook refuses", []*corev1.Pod{gpuPod("kai-min-bare", nil, map[string]string{workload.KAIAnnotationMinMember: "2"}, nil)},
			reasonInvalid, `annotation kai.scheduler/batch-min-member: set to "2" on a pod that no Job controls`},
		{"two gangs", []*corev1.Pod{gpuPod("two-gangs", group("g"), minMember("1", map[string]string{workload.VolcanoAnnotationGroupName: "job-1"}), nil)},
			reasonInvalid, `annotation scheduling.k8s.io/group-name: names Volcano PodGroup "job-1" while label tessera.io/pod-group names "g"`},
		{"DRA claim not made yet", []*corev1.Pod{withClaim(tessera("claims", "1", nil, nil))},
			reasonUnschedulable, "spec.resourceClaims[0] (gpu): waiting for the ResourceClaim of template quarter-gpu to be made"},
		{"two queues", []*corev1.Pod{gpuPod("two-queues", map[string]string{workload.KAILabelQueue: "capped", queues.LabelQueue: "default"}, nil, nil)},
			reasonInvalid, `label kai.scheduler/queue: label "capped" disagrees with label tessera.io/queue "default"`},
		{"nvshare without an oversubscribing node", []*corev1.Pod{nvsharePod("nvshare")},
			reasonUnschedulable, "agent does not oversubscribe GPU memory (tessera agent --oversubscribe)"},
		{"no fit", []*corev1.Pod{tessera("too-big", "3", nil, nil)},
			reasonUnschedulable, "no node fits 3 GPU(s) at compute 1000/1000 for default/too-big/main"},
		{"unknown queue", []*corev1.Pod{tessera("ghost", "1", map[string]string{queues.LabelQueue: "ghost"}, h100)},
			reasonInvalid, `label tessera.io/queue: queue "ghost" does not exist`},
		{"queue limit", []*corev1.Pod{tessera("capped", "2", map[string]string{queues.LabelQueue: "capped"}, h100)},
			reasonQueueLimit, "queue capped: would use"},
		{"gang waiting for members", []*corev1.Pod{tessera("alone-0", "1", group("alone"), minMember("3", h100))},
			reasonUnschedulable, "gang default/alone: 1 of 3 members exist"},
		{"gang minimum does not fit", []*corev1.Pod{tessera("misfit-0", "2", group("misfit"), minMember("2", h100)), tessera("misfit-1", "2", group("misfit"), minMember("2", h100))},
			reasonUnschedulable, "gang default/misfit: only "},
		{"gang members disagree", []*corev1.Pod{tessera("split-0", "1", group("split"), minMember("2", h100)), tessera("split-1", "1", group("split"), minMember("3", h100))},
			reasonInvalid, "annotation tessera.io/pod-group-min-member: members disagree"},
		{"Volcano PodGroup missing", []*corev1.Pod{gpuPod("volcano-lost", nil, map[string]string{workload.VolcanoAnnotationGroupName: "lost"}, nil)},
			reasonInvalid, "Volcano PodGroup default/lost not found"},
		{"node reserved for a pod waiting longer", []*corev1.Pod{tessera("small", "1", nil, l4)},
			reasonUnschedulable, "reserved for a pod waiting longer"},
		{"binding refused", []*corev1.Pod{tessera("unbindable", "1", nil, h100)},
			corev1.PodReasonSchedulerError, "bindings of these pods are denied by policy"},
	}
	for _, tc := range cases {
		for _, p := range tc.pods {
			mustCreatePod(ctx, t, client, p)
		}
	}
	says := func(name, reason, msg string) error {
		if err := hasCondition(ctx, client, name, reason, msg); err != nil {
			return err
		}
		return hasEvent(ctx, client, name, corev1.EventTypeWarning, "FailedScheduling", msg)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitFor(t, tc.pods[0].Name+" says why", func() error { return says(tc.pods[0].Name, tc.reason, tc.msg) })
		})
	}
	// Retried and backed off, each keeps its condition and event (no
	// cycle clears them), and none binds.
	time.Sleep(2 * time.Second)
	for _, tc := range cases {
		if err := says(tc.pods[0].Name, tc.reason, tc.msg); err != nil {
			t.Errorf("%s, after a few retries: %v", tc.name, err)
		}
	}
	// Every pod that names this scheduler but running waits, with a
	// condition and an event. (denyBindings' probes name no scheduler.)
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulerName != DefaultName || p.Name == "running" {
			continue
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s was bound to %s", p.Name, p.Spec.NodeName)
			continue
		}
		if err := pendingWithReason(&p); err != nil {
			t.Error(err)
		}
		if err := hasEvent(ctx, client, p.Name, corev1.EventTypeWarning, "FailedScheduling", ""); err != nil {
			t.Error(err)
		}
	}
}

// pendingWithReason checks an unbound pod has PodScheduled=False with a
// reason and a message.
func pendingWithReason(p *corev1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" && c.Message != "" {
			return nil
		}
	}
	return fmt.Errorf("pending pod %s has no PodScheduled=False condition with a reason and message: %+v", p.Name, p.Status.Conditions)
}

// withClaim gives p a DRA claim from a template.
func withClaim(p *corev1.Pod) *corev1.Pod {
	tmpl := "quarter-gpu"
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	return p
}
