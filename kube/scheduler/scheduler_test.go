package scheduler

import (
	"context"
	"fmt"

	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/internal/testcluster"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestSchedulerOnRealControlPlane runs the scheduler against etcd,
// kube-apiserver and KWOK: fractional pods pack onto fake GPU nodes with
// their assignment recorded, bad requests and impossible requests stay
// pending with a condition and an event, and a restarted scheduler books
// nothing twice.
func TestSchedulerOnRealControlPlane(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, true)
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	// gpu-0 is described by labels only; gpu-1 by a GPUNode object, as the
	// agent publishes it (real UUIDs).
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", nil)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	sim, err := simulated.FromSpec("2xH100", catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	simNodes, _ := sim.Discover(ctx)
	inv := simNodes[0]
	inv.Name = "gpu-1"
	if _, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(inv, 16, gpunode.SharingShared), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{"gpu-0/gpu0": "gpu-0", "gpu-0/gpu1": "gpu-0"}
	for _, g := range inv.GPUs {
		nodeOf[g.UUID] = "gpu-1"
	}
	waitFor(t, "nodes Ready", func() error {
		for i := 0; i < 2; i++ {
			n, err := client.CoreV1().Nodes().Get(ctx, fmt.Sprintf("gpu-%d", i), metav1.GetOptions{})
			if err != nil || !ready(n) {
				return fmt.Errorf("node gpu-%d not ready (%v)", i, err)
			}
		}
		return nil
	})

	reg := prometheus.NewRegistry()
	stop := startScheduler(ctx, t, client, dyn, reg)
	for i := 0; i < 12; i++ {
		createPod(ctx, t, client, fmt.Sprintf("frac-%02d", i), "1", map[string]string{workload.AnnotationCompute: "0.25"})
	}
	createPod(ctx, t, client, "bad-fraction", "1", map[string]string{workload.AnnotationCompute: "1.5"})
	createPod(ctx, t, client, "too-big", "3", nil)

	waitFor(t, "12 fractional pods bound", func() error { return countBound(ctx, client, "frac-", 12) })
	waitFor(t, "bad request reported", func() error {
		return hasCondition(ctx, client, "bad-fraction", reasonInvalid, "annotation tessera.io/gpu-fraction of container main: must be a share in (0, 1]")
	})
	waitFor(t, "impossible request reported", func() error {
		return hasCondition(ctx, client, "too-big", corev1.PodReasonUnschedulable, "no node fits 3 GPU(s)")
	})
	waitFor(t, "warning event for the bad request", func() error {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-fraction"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "tessera.io/gpu-fraction") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none a warning about tessera.io/gpu-fraction", len(evs.Items))
	})
	checkNoOverbooking(ctx, t, client, nodeOf)
	if got := decisions(t, reg, "bound"); got != 12 {
		t.Errorf("decisions_total{result=bound} = %v, want 12", got)
	}
	if got := decisions(t, reg, "invalid"); got < 1 {
		t.Errorf("decisions_total{result=invalid} = %v, want >= 1", got)
	}

	// Restart: pods created while no scheduler runs are placed by a new one
	// that rebuilt its view from the API only.
	stop()
	for i := 12; i < 20; i++ {
		createPod(ctx, t, client, fmt.Sprintf("frac-%02d", i), "1", map[string]string{workload.AnnotationCompute: "0.25"})
	}
	stop = startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "16 fractional pods bound after restart", func() error { return countBound(ctx, client, "frac-", 16) })
	time.Sleep(2 * time.Second) // a few more cycles: nothing else may be bound
	if err := countBound(ctx, client, "frac-", 16); err != nil {
		t.Fatal(err)
	}
	checkNoOverbooking(ctx, t, client, nodeOf)
}

func startScheduler(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, reg prometheus.Registerer, opts ...func(*Config)) (stop func()) {
	t.Helper()
	cfg := Config{Client: client, Dynamic: dyn, Metrics: reg, Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})), Resync: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}
}

func createGPUNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), workload.ResourceGPU: resource.MustParse("32"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, gpus string, ann map[string]string) {
	t.Helper()
	createPodWith(ctx, t, c, name, gpus, nil, ann)
}

func createPodWith(ctx context.Context, t *testing.T, c kubernetes.Interface, name, gpus string, labels, ann map[string]string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)},
			},
		}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func countBound(ctx context.Context, c kubernetes.Interface, prefix string, want int) error {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	n := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d pods %s* bound, want %d", n, prefix, want)
	}
	return nil
}

func hasCondition(ctx context.Context, c kubernetes.Interface, name, reason, msg string) error {
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName != "" {
		return fmt.Errorf("pod %s was bound to %s", name, p.Spec.NodeName)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == reason && strings.Contains(cond.Message, msg) {
			return nil
		}
	}
	return fmt.Errorf("pod %s conditions %+v lack %s %q", name, p.Status.Conditions, reason, msg)
}

// checkNoOverbooking sums the granted compute per GPU over all bound pods
// and checks every granted GPU belongs to the pod's node (nodeOf: UUID -> node).
func checkNoOverbooking(ctx context.Context, t *testing.T, c kubernetes.Interface, nodeOf map[string]string) {
	t.Helper()
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Fatalf("bound pod %s: %v", p.Name, err)
		}
		if a.Node != p.Spec.NodeName {
			t.Fatalf("pod %s bound to %s but assigned on %s", p.Name, p.Spec.NodeName, a.Node)
		}
		for _, ctr := range a.Containers {
			for _, g := range ctr.GPUs {
				if nodeOf[g.UUID] != p.Spec.NodeName {
					t.Fatalf("pod %s on %s got GPU %s, which is on %q", p.Name, p.Spec.NodeName, g.UUID, nodeOf[g.UUID])
				}
				used[g.UUID] += g.ComputeMilli
			}
		}
	}
	for uuid, m := range used {
		if m > 1000 {
			t.Fatalf("GPU %s over-booked: %d/1000", uuid, m)
		}
	}
}

// waitFor polls check; the bound is a liveness guard, not a performance target.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testWriter sends log lines to the test log, shown only on failure or -v.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// controlPlane starts etcd, kube-apiserver and KWOK for one test and
// returns a client; everything stops when the test ends.
func controlPlane(t *testing.T) (context.Context, kubernetes.Interface) {
	t.Helper()
	ctx, _, cfg := testcluster.ForTest(t, true)
	c := kubernetes.NewForConfigOrDie(cfg)
	restConfigs.Store(c, cfg)
	return ctx, c
}

// restConfigs remembers each test client's config (for dynamicFor).
var restConfigs sync.Map

func dynamicFor(t *testing.T, c kubernetes.Interface) dynamic.Interface {
	t.Helper()
	cfg, ok := restConfigs.Load(c)
	if !ok {
		t.Fatal("no rest config for client")
	}
	return dynamic.NewForConfigOrDie(cfg.(*rest.Config))
}

// TestGangAllOrNothing: a gang that cannot fit as a whole binds no member,
// one that fits binds all, and a member with a bad minimum is reported.
func TestGangAllOrNothing(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	gangPod := func(name, group, min string) {
		createPodWith(ctx, t, client, name, "1", map[string]string{LabelPodGroup: group}, map[string]string{AnnotationMinMember: min})
	}
	for i := 0; i < 3; i++ {
		gangPod(fmt.Sprintf("big-%d", i), "big", "3") // needs 3 GPUs, the node has 2
	}
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "big gang reported", func() error {
		return hasCondition(ctx, client, "big-0", corev1.PodReasonUnschedulable, "gang default/big: only 2 of the 3 members still needed fit, so none is bound")
	})
	gangPod("pair-0", "pair", "2")
	gangPod("pair-1", "pair", "2")
	waitFor(t, "pair gang bound", func() error { return countBound(ctx, client, "pair-", 2) })
	gangPod("odd-0", "odd", "many")
	waitFor(t, "bad minimum reported", func() error {
		return hasCondition(ctx, client, "odd-0", reasonInvalid, `annotation tessera.io/pod-group-min-member: must be a whole number in [1, 10000], got "many"`)
	})
	gangPod("wait-0", "wait", "2")
	waitFor(t, "incomplete gang waits", func() error {
		return hasCondition(ctx, client, "wait-0", corev1.PodReasonUnschedulable, "gang default/wait: 1 of 2 members exist")
	})
	if err := countBound(ctx, client, "big-", 0); err != nil {
		t.Fatal(err)
	}
}

// TestLeaderFailover runs two replicas with leader election: only the
// leader binds; when it stops, the other takes over and binds new pods.
func TestLeaderFailover(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "4"})
	le := LeaderElection{Namespace: "default", Name: "tessera-test", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond}
	start := func(id string) (context.CancelFunc, chan error) {
		s, err := New(Config{Client: client, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Resync: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		l := le
		l.Identity = id
		go func() { done <- s.RunWithLeaderElection(rctx, l) }()
		return stop, done
	}
	stopA, doneA := start("replica-a")
	waitFor(t, "replica-a leads", func() error { return holder(ctx, client, "replica-a") })
	stopB, doneB := start("replica-b")
	defer func() { stopB(); <-doneB }()
	createPod(ctx, t, client, "first", "1", nil)
	waitFor(t, "first bound", func() error { return countBound(ctx, client, "first", 1) })
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("replica-a: %v", err)
	}
	waitFor(t, "replica-b leads", func() error { return holder(ctx, client, "replica-b") })
	createPod(ctx, t, client, "second", "1", nil)
	waitFor(t, "second bound by the new leader", func() error { return countBound(ctx, client, "second", 1) })
}

func holder(ctx context.Context, c kubernetes.Interface, id string) error {
	l, err := c.CoordinationV1().Leases("default").Get(ctx, "tessera-test", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
		return fmt.Errorf("lease held by %v, want %s", l.Spec.HolderIdentity, id)
	}
	return nil
}

// decisions reads tessera_scheduler_decisions_total{result=...} from reg.
func decisions(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tessera_scheduler_decisions_total" {
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
	t.Fatalf("no decisions_total{result=%q}", result)
	return 0
}

// TestPreemption: a high-priority pod that fits nowhere evicts the
// lowest-priority pod it needs to, the victim gets an event saying why,
// and the high-priority pod is then bound; equal priority never preempts.
func TestPreemption(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
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

// TestQueuesFairShare: queues with guarantees split a full node by fair
// share, not arrival order; a queue's hard limit holds; an unknown queue is
// reported.
func TestQueuesFairShare(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	for _, q := range []map[string]any{
		{"name": "team-a", "spec": map[string]any{"guaranteed": map[string]any{"gpu": "2"}}},
		{"name": "team-b", "spec": map[string]any{"guaranteed": map[string]any{"gpu": "2"}}},
		{"name": "capped", "spec": map[string]any{"limit": map[string]any{"gpu": "1"}}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tessera.io/v1alpha1", "kind": "Queue",
			"metadata": map[string]any{"name": q["name"]}, "spec": q["spec"],
		}}
		if _, err := dyn.Resource(queues.Resource()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "5"})
	inQueue := func(name, queue string) {
		createPodWith(ctx, t, client, name, "1", map[string]string{queues.LabelQueue: queue}, nil)
	}
	// team-a arrives first with more than the whole node's worth.
	for i := 0; i < 6; i++ {
		inQueue(fmt.Sprintf("a-%d", i), "team-a")
	}
	inQueue("b-0", "team-b")
	inQueue("b-1", "team-b")
	inQueue("c-0", "capped")
	inQueue("c-1", "capped")
	inQueue("ghost-0", "ghost")
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "team-b gets its guarantee", func() error { return countBound(ctx, client, "b-", 2) })
	waitFor(t, "capped gets one GPU", func() error { return countBound(ctx, client, "c-", 1) })
	waitFor(t, "team-a gets its guarantee", func() error { return countBound(ctx, client, "a-", 2) })
	waitFor(t, "capped's second pod hits the limit", func() error {
		for _, n := range []string{"c-0", "c-1"} {
			if hasCondition(ctx, client, n, reasonQueueLimit, "queue capped: would use") == nil {
				return nil
			}
		}
		return fmt.Errorf("no capped pod reports the queue limit")
	})
	waitFor(t, "unknown queue reported", func() error {
		return hasCondition(ctx, client, "ghost-0", reasonInvalid, `label tessera.io/queue: queue "ghost" does not exist`)
	})
}

// controlPlaneDyn is controlPlane plus a dynamic client.
func controlPlaneDyn(t *testing.T) (context.Context, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	ctx, client := controlPlane(t)
	return ctx, client, dynamicFor(t, client)
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
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": "Queue", "metadata": map[string]any{"name": name}, "spec": spec}}
		if _, err := dyn.Resource(queues.Resource()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
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

// TestJobsAreAutomaticGangs: the pods of a Job with parallelism > 1 form a
// gang of that size without any label.
func TestJobsAreAutomaticGangs(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	job := func(name string, parallelism int32) {
		t.Helper()
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}},
			}}},
		}
		created, err := client.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// No Job controller runs here: create its pods as it would.
		for i := int32(0); i < parallelism; i++ {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default",
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(created, batchv1.SchemeGroupVersion.WithKind("Job"))}},
				Spec: corev1.PodSpec{SchedulerName: DefaultName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "main", Image: "example.invalid/none",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}},
				}}},
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	job("wide", 3) // 3 GPUs at once on a 2-GPU node: never
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()
	waitFor(t, "wide job waits as a gang", func() error {
		return hasCondition(ctx, client, "wide-0", corev1.PodReasonUnschedulable, "gang default/job:wide: only 2 of the 3 members still needed fit")
	})
	job("pair", 2)
	waitFor(t, "pair job bound", func() error { return countBound(ctx, client, "pair-", 2) })
	if err := countBound(ctx, client, "wide-", 0); err != nil {
		t.Fatal(err)
	}
}

// TestReservationStopsBackfillThatWouldDelayABigPod: a two-GPU pod blocked
// behind a running pod reserves the node; a one-GPU pod that would take the
// free GPU (and delay it) waits instead; when the running pod ends the big
// pod gets the node.
func TestReservationStopsBackfillThatWouldDelayABigPod(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()
	createPod(ctx, t, client, "running", "1", nil)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running", 1) })
	createPod(ctx, t, client, "big", "2", nil)
	waitFor(t, "big blocked", func() error {
		return hasCondition(ctx, client, "big", corev1.PodReasonUnschedulable, "no node fits 2 GPU(s)")
	})
	time.Sleep(time.Second) // a few cycles: the reservation is made
	createPod(ctx, t, client, "small", "1", nil)
	waitFor(t, "small may not backfill", func() error {
		return hasCondition(ctx, client, "small", corev1.PodReasonUnschedulable, "reserved for a pod waiting longer")
	})
	if err := client.CoreV1().Pods("default").Delete(ctx, "running", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "big gets the node", func() error { return countBound(ctx, client, "big", 1) })
	if err := countBound(ctx, client, "small", 0); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillElsewhereIsAllowed: with a node reserved, a small pod still
// runs on another node. Model constraints make the layout deterministic:
// only gpu-0 (two H100s) can ever take the H100 pods.
func TestBackfillElsewhereIsAllowed(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	createGPUNode(ctx, t, client, "gpu-1", map[string]string{LabelModel: "L4", LabelCount: "1"})
	stop := startScheduler(ctx, t, client, nil, nil, func(c *Config) { c.ReservationWait = time.Nanosecond })
	defer stop()
	h100 := map[string]string{workload.AnnotationModel: "H100"}
	createPod(ctx, t, client, "running", "1", h100)
	waitFor(t, "running bound", func() error { return countBound(ctx, client, "running", 1) })
	createPod(ctx, t, client, "big", "2", h100)
	waitFor(t, "big blocked", func() error {
		return hasCondition(ctx, client, "big", corev1.PodReasonUnschedulable, "no node fits 2 GPU(s)")
	})
	time.Sleep(time.Second)
	createPod(ctx, t, client, "small", "1", nil)
	waitFor(t, "small backfills on gpu-1", func() error {
		p, err := client.CoreV1().Pods("default").Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "gpu-1" {
			return fmt.Errorf("small on %q", p.Spec.NodeName)
		}
		return nil
	})
}

// TestPodGroupResource: a PodGroup gives its members' minimum (no
// annotation needed) and a timeout after which waiting members say so.
func TestPodGroupResource(t *testing.T) {
	ctx, client, dyn := controlPlaneDyn(t)
	if err := podgroups.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]map[string]any{
		"trio": {"minMember": int64(3), "scheduleTimeoutSeconds": int64(1)},
		"duo":  {"minMember": int64(2)},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
		if _, err := dyn.Resource(podgroups.Resource()).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{LabelModel: "H100", LabelCount: "2"})
	for i := 0; i < 3; i++ {
		createPodWith(ctx, t, client, fmt.Sprintf("trio-%d", i), "1", map[string]string{LabelPodGroup: "trio"}, nil)
	}
	stop := startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "trio times out", func() error {
		return hasCondition(ctx, client, "trio-0", corev1.PodReasonUnschedulable, "gang default/trio timed out")
	})
	createPodWith(ctx, t, client, "duo-0", "1", map[string]string{LabelPodGroup: "duo"}, nil)
	createPodWith(ctx, t, client, "duo-1", "1", map[string]string{LabelPodGroup: "duo"}, nil)
	waitFor(t, "duo bound", func() error { return countBound(ctx, client, "duo-", 2) })
	if err := countBound(ctx, client, "trio-", 0); err != nil {
		t.Fatal(err)
	}
}
