package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestCPUOnlyPods: pods that ask Tessera for no GPU (none at all, or only
// keys Tessera does not read) are bound like any pod, get PodScheduled and
// an event, carry no assignment, and count against their node's CPU, also
// on a node without GPUs, across a scheduler restart.
func TestCPUOnlyPods(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createNode(ctx, t, client, "cpu-0", map[string]string{"pool": "cpu"}, "4", "16Gi")
	cpuPool := map[string]string{"pool": "cpu"}
	stop := startScheduler(ctx, t, client, nil, nil)

	// cpu-0 has 4 CPUs: 3 taken, 1 left; a 2-CPU pod does not fit there.
	createCPUPod(ctx, t, client, "three", "3", cpuPool, nil)
	waitFor(t, "three bound on cpu-0", func() error { return boundTo(ctx, client, "three", "cpu-0") })
	createCPUPod(ctx, t, client, "two", "2", cpuPool, nil)
	waitFor(t, "two does not fit", func() error {
		return hasCondition(ctx, client, "two", corev1.PodReasonUnschedulable, "insufficient CPU: 1000m free, 2000m requested")
	})

	// A restarted scheduler books the bound CPU-only pod from its spec: the
	// last CPU fits a 1-CPU pod, never the older 2-CPU one (tried first).
	stop()
	stop = startScheduler(ctx, t, client, nil, nil)
	defer stop()
	createCPUPod(ctx, t, client, "one", "1", cpuPool, nil)
	waitFor(t, "one bound on cpu-0", func() error { return boundTo(ctx, client, "one", "cpu-0") })
	if err := countBound(ctx, client, "two", 0); err != nil {
		t.Fatal(err)
	}

	// An unconstrained CPU-only pod (cpu-0 is full: it goes to gpu-0) beside
	// a GPU pod, which keeps its assignment. One asking for an extended
	// resource no node advertises waits, as under kube-scheduler (its own
	// NodeResourcesFit says why: kube/kubefilter).
	createCPUPod(ctx, t, client, "plain", "1", nil, nil)
	createCPUPod(ctx, t, client, "other-key", "500m", nil, corev1.ResourceList{"example.com/accelerator": resource.MustParse("1")})
	createGPUPod(ctx, t, client, "gpu", "1", nil)
	waitFor(t, "other-key waits", func() error {
		return hasCondition(ctx, client, "other-key", corev1.PodReasonUnschedulable, "NodeResourcesFit: Insufficient example.com/accelerator")
	})
	for _, name := range []string{"plain"} {
		waitFor(t, name+" bound", func() error { return scheduledTrue(ctx, client, name) })
		waitFor(t, name+" event", func() error {
			return hasEvent(ctx, client, name, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/"+name+" to gpu-0")
		})
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := p.Annotations[binding.AnnotationKey]; ok {
			t.Errorf("CPU-only pod %s carries an assignment: %s", name, v)
		}
	}
	waitFor(t, "GPU pod bound", func() error { return countBound(ctx, client, "gpu", 1) })
	checkNoOverbooking(ctx, t, client, map[string]string{"gpu-0/gpu0": "gpu-0", "gpu-0/gpu1": "gpu-0"})
	if err := countBound(ctx, client, "two", 0); err != nil {
		t.Fatal(err)
	}
}

// TestGangWithCPUOnlyMember: an MPI-style gang (a CPU-only launcher and two
// GPU workers) binds all three members, and one whose launcher fits
// nowhere binds none.
func TestGangWithCPUOnlyMember(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	gang := func(name, launcherCPU string) {
		t.Helper()
		labels := map[string]string{membership.LabelPodGroup: name}
		ann := map[string]string{membership.AnnotationMinMember: "3"}
		createCPUPodWith(ctx, t, client, name+"-launcher", launcherCPU, labels, ann, nil)
		createPodWith(ctx, t, client, name+"-worker-0", "1", labels, ann)
		createPodWith(ctx, t, client, name+"-worker-1", "1", labels, ann)
	}
	gang("mpi", "1")
	waitFor(t, "the whole mpi gang bound", func() error { return countBound(ctx, client, "mpi-", 3) })
	for _, name := range []string{"mpi-launcher", "mpi-worker-0", "mpi-worker-1"} {
		if err := scheduledTrue(ctx, client, name); err != nil {
			t.Error(err)
		}
	}

	gang("fat", "1000") // the launcher asks for more CPU than any node has
	waitFor(t, "fat gang held back", func() error {
		return hasCondition(ctx, client, "fat-worker-0", corev1.PodReasonUnschedulable,
			"gang default/fat: only 2 of the 3 members still needed fit, so none is placed (all or nothing); first misfit: default/fat-launcher: no node fits default/fat-launcher: ")
	})
	if err := countBound(ctx, client, "fat-", 0); err != nil {
		t.Fatal(err)
	}
}

// TestUnbindablePodBacksOff: a pod whose binding the API server refuses
// (an admission policy denies it) and a pod that fits nowhere each get a
// PodScheduled=False condition and a Warning event, and are tried again
// only as often as the backoff allows (counted through the scheduler's
// metrics against what 1s doubling to 10s permits in the time elapsed);
// once the policy goes, the refused pod binds.
func TestUnbindablePodBacksOff(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"})
	denyBindings(ctx, t, client, "unbindable")
	createGPUPod(ctx, t, client, "unbindable", "1", nil)
	createGPUPod(ctx, t, client, "infeasible", "3", nil) // 3 GPUs on a 2-GPU node
	reg := prometheus.NewRegistry()
	start := time.Now()
	stop := startScheduler(ctx, t, client, nil, reg, func(c *Config) {
		c.PodInitialBackoff, c.PodMaxBackoff = DefaultPodInitialBackoff, DefaultPodMaxBackoff
	})
	defer stop()
	waitFor(t, "refused binding reported", func() error {
		return hasCondition(ctx, client, "unbindable", corev1.PodReasonSchedulerError, "bindings of these pods are denied by policy")
	})
	waitFor(t, "refused binding event", func() error {
		return hasEvent(ctx, client, "unbindable", corev1.EventTypeWarning, "FailedScheduling", "bindings of these pods are denied by policy")
	})
	waitFor(t, "infeasible pod reported", func() error {
		return hasCondition(ctx, client, "infeasible", corev1.PodReasonUnschedulable, "no node fits 3 GPU(s)")
	})
	waitFor(t, "infeasible pod event", func() error {
		return hasEvent(ctx, client, "infeasible", corev1.EventTypeWarning, "FailedScheduling", "no node fits 3 GPU(s)")
	})
	time.Sleep(4 * time.Second) // a few retries' worth
	allowed := backoffAttempts(DefaultPodInitialBackoff, DefaultPodMaxBackoff, time.Since(start))
	failedBinds := counter(t, reg, "tessera_scheduler_bindings_total", "error")
	misfits := counter(t, reg, "tessera_scheduler_decisions_total", "unschedulable")
	t.Logf("in %v: %v refused bindings, %v misfit decisions; the backoff allows %d each", time.Since(start).Round(time.Millisecond), failedBinds, misfits, allowed)
	if failedBinds < 1 || failedBinds > float64(allowed) {
		t.Errorf("bindings_total{result=error} = %v, want 1..%d", failedBinds, allowed)
	}
	if misfits < 1 || misfits > float64(allowed) {
		t.Errorf("decisions_total{result=unschedulable} = %v, want 1..%d", misfits, allowed)
	}
	if err := boundTo(ctx, client, "unbindable", ""); err != nil {
		t.Fatal(err)
	}

	// The obstacle goes: the pod is bound at its next retry.
	if err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "deny-bindings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "unbindable bound once allowed", func() error { return scheduledTrue(ctx, client, "unbindable") })
	if got := counter(t, reg, "tessera_scheduler_bindings_total", "bound"); got != 1 {
		t.Errorf("bindings_total{result=bound} = %v, want 1", got)
	}
}

// backoffAttempts is how many attempts a backoff from initial doubling to
// max allows in elapsed after the first.
func backoffAttempts(initial, max, elapsed time.Duration) int {
	n, at, d := 1, time.Duration(0), initial
	for {
		at += min(d, max)
		d *= 2
		if at > elapsed {
			return n
		}
		n++
	}
}

// denyBindings installs an admission policy that refuses to bind pods whose
// name starts with prefix, and waits until it is in force.
func denyBindings(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) {
	t.Helper()
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-bindings"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!object.metadata.name.startsWith(%q)", prefix),
				Message:    "bindings of these pods are denied by policy",
			}},
		},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pb := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-bindings"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "deny-bindings", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, pb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Probe pods that no scheduler serves: bind them until one is refused.
	probe := 0
	waitFor(t, "binding policy in force", func() error {
		name := fmt.Sprintf("%s-probe-%d", prefix, probe)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		probe++
		err := c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "nowhere"}}, metav1.CreateOptions{})
		if err == nil {
			return fmt.Errorf("probe %s was bound: the policy is not in force yet", name)
		}
		if !strings.Contains(err.Error(), "denied by policy") {
			return err
		}
		return nil
	})
}

// createNode creates a KWOK node without GPUs.
func createNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels map[string]string, cpu, mem string) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createCPUPod creates a Tessera pod asking for CPU and no Tessera GPU
// (limits may name resources Tessera does not read).
func createCPUPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, cpu string, nodeSelector map[string]string, limits corev1.ResourceList) {
	t.Helper()
	createPodSpec(ctx, t, c, name, nil, nil, corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{
		Name: "main", Image: "example.invalid/none",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}, Limits: limits},
	}}})
}

// createCPUPodWith is createCPUPod with labels and annotations.
func createCPUPodWith(ctx context.Context, t *testing.T, c kubernetes.Interface, name, cpu string, labels, ann map[string]string, nodeSelector map[string]string) {
	t.Helper()
	createPodSpec(ctx, t, c, name, labels, ann, corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{
		Name: "main", Image: "example.invalid/none",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
	}}})
}

// createGPUPod creates a Tessera pod asking for gpus tessera.io/gpu and no CPU.
func createGPUPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, gpus string, ann map[string]string) {
	t.Helper()
	createPodSpec(ctx, t, c, name, nil, ann, corev1.PodSpec{Containers: []corev1.Container{{
		Name: "main", Image: "example.invalid/none",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)}},
	}}})
}

func createPodSpec(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels, ann map[string]string, spec corev1.PodSpec) {
	t.Helper()
	spec.SchedulerName = DefaultName
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann}, Spec: spec}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// scheduledTrue checks the pod is bound with PodScheduled=True.
func scheduledTrue(ctx context.Context, c kubernetes.Interface, name string) error {
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName == "" {
		return fmt.Errorf("pod %s is not bound (conditions %+v)", name, p.Status.Conditions)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("pod %s bound to %s without PodScheduled=True: %+v", name, p.Spec.NodeName, p.Status.Conditions)
}

// boundTo checks the pod is bound to node.
func boundTo(ctx context.Context, c kubernetes.Interface, name, node string) error {
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName != node {
		return fmt.Errorf("pod %s on %q, want %s", name, p.Spec.NodeName, node)
	}
	return nil
}

// hasEvent checks the pod has an event of the type and reason whose
// message contains msg.
func hasEvent(ctx context.Context, c kubernetes.Interface, name, typ, reason, msg string) error {
	evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Type == typ && e.Reason == reason && strings.Contains(e.Message, msg) {
			return nil
		}
	}
	return fmt.Errorf("pod %s: %d events, none %s %s containing %q", name, len(evs.Items), typ, reason, msg)
}

// counter reads a counter series NAME{result=...} from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{result=%q}", name, result)
	return 0
}
