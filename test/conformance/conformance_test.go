package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

const (
	ns          = "default"
	hostnameKey = "kubernetes.io/hostname"
	zoneKey     = "topology.kubernetes.io/zone"
	// rowLabel marks a row's nodes (its pods select them) and pods.
	rowLabel = "conformance.tessera.io/row"
	// runLabel marks the pods one run made (not the fixtures), with the
	// scheduler's name.
	runLabel           = "conformance.tessera.io/run"
	fakeNodeAnnotation = testcluster.FakeNodeAnnotation
	// settleCycles: once Tessera's outcome is the oracle's, it must stay so
	// for this many more scheduling cycles (the pods left pending are tried
	// again after their backoff, at most PodMaxBackoff).
	settleCycles = 10
)

// outcome is what became of each pod of a row in one run, by pod name.
type outcome map[string]result

// result is a pod's node, or why it is pending: its PodScheduled
// condition's reason (Unschedulable; SchedulingGated for a pod no
// scheduler may try yet).
type result struct{ node, why string }

// TestSameOutcomeAsKubeScheduler runs every row's pods under the stock
// kube-scheduler, records which bind and where, deletes them, runs the
// same pods under Tessera's scheduler, and asserts the same outcome as
// far as the row's constraint decides it (row.compare). All rows share one
// control plane and run at once, each on nodes of its own.
func TestSameOutcomeAsKubeScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and both schedulers")
	}
	// The PV binder binds claims to volumes and hands a
	// WaitForFirstConsumer claim's picked node to its provisioner; the
	// gang rows' PodGroups are the Workload API's.
	ctx, cluster, cfg := testcluster.ForTestWith(t, true, testcluster.Options{Controllers: []string{testcluster.PVBinderController},
		FeatureGates: []string{workloadGate}, RuntimeConfig: []string{schedulingv1beta1.SchemeGroupVersion.String() + "=true"}})
	cfg.QPS, cfg.Burst = 200, 400
	client := kubernetes.NewForConfigOrDie(cfg)
	rs := rows()
	for _, pc := range priorityClasses() {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range storageClasses() {
		if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pctx, stopProvisioner := context.WithCancel(ctx)
	provisioned := make(chan struct{})
	go func() { defer close(provisioned); provision(pctx, t, client) }()
	defer func() { stopProvisioner(); <-provisioned }()
	var names []string
	for _, r := range rs {
		for _, n := range r.nodes {
			if _, err := client.CoreV1().Nodes().Create(ctx, n.object(r.name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if cn := n.csiNode(); cn != nil {
				if _, err := client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			names = append(names, n.name)
		}
		for _, p := range r.fixtures {
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	testcluster.Eventually(t, "nodes Ready", time.Minute, func() error { return nodesReady(ctx, client, names) })

	if err := cluster.StartKubeScheduler(ctx, 0, 0, "--feature-gates="+workloadGate); err != nil {
		t.Fatal(err)
	}
	oracle := corev1.DefaultSchedulerName
	createRun(ctx, t, client, rs, oracle, withoutGPU)
	var want map[string]outcome
	testcluster.Eventually(t, "kube-scheduler decides every pod", 2*time.Minute, func() (err error) {
		if want, err = decided(ctx, client, rs, oracle); err != nil {
			return err
		}
		return checked(ctx, client, rs, want)
	})
	cluster.StopKubeScheduler()
	for _, r := range rs {
		t.Logf("row %s (%s): kube-scheduler %s", r.name, r.what, describe(want[r.name]))
	}
	deleteRun(ctx, t, client, oracle)

	var cycles atomic.Int64
	asked := &binds{by: map[string]int{}}
	stop := startTessera(ctx, t, bindCounter{Interface: client, binds: asked}, dynamic.NewForConfigOrDie(cfg), func(scheduler.CycleStats) { cycles.Add(1) })
	defer stop()
	tessera := scheduler.DefaultName
	createRun(ctx, t, client, rs, tessera, nil)
	var got map[string]outcome
	same := func() error {
		var err error
		if got, err = decided(ctx, client, rs, tessera); err != nil {
			return err
		}
		return errors.Join(differences(rs, want, got), checked(ctx, client, rs, got))
	}
	testcluster.Eventually(t, "Tessera ends every row as kube-scheduler did", time.Minute, same)
	// Nothing binds later: the pods left pending are tried again.
	from := cycles.Load()
	testcluster.Eventually(t, fmt.Sprintf("%d more cycles", settleCycles), time.Minute, func() error {
		if n := cycles.Load() - from; n < settleCycles {
			return fmt.Errorf("%d cycles", n)
		}
		return nil
	})
	if err := same(); err != nil {
		t.Error(err)
	}
	for _, r := range rs {
		t.Logf("row %s: Tessera %s", r.name, describe(got[r.name]))
		failed := asked.pending(got[r.name])
		if r.gap == "" && failed != "" {
			t.Errorf("row %s: Tessera asked Bindings for pods it left pending (kube-scheduler asks none): %s", r.name, failed)
		}
		if r.gap != "" && r.compare.same(want[r.name], got[r.name]) && failed == "" {
			t.Errorf("row %s now ends as kube-scheduler ends it: drop its gap (%s)", r.name, r.gap)
		}
	}
}

// binds counts the Bindings Tessera asks, by pod name.
type binds struct {
	mu sync.Mutex
	by map[string]int
}

// pending names the pods of o left pending that Tessera asked Bindings
// for, with how many; "" when none.
func (b *binds) pending(o outcome) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, p := range slices.Sorted(maps.Keys(o)) {
		if n := b.by[p]; n > 0 && o[p].node == "" {
			out = append(out, fmt.Sprintf("%s (%d)", p, n))
		}
	}
	return strings.Join(out, ", ")
}

// bindCounter is Tessera's client: it counts the Bindings asked.
type bindCounter struct {
	kubernetes.Interface
	binds *binds
}

func (c bindCounter) CoreV1() typedcorev1.CoreV1Interface {
	return bindCore{CoreV1Interface: c.Interface.CoreV1(), binds: c.binds}
}

type bindCore struct {
	typedcorev1.CoreV1Interface
	binds *binds
}

func (c bindCore) Pods(namespace string) typedcorev1.PodInterface {
	return bindPods{PodInterface: c.CoreV1Interface.Pods(namespace), binds: c.binds}
}

type bindPods struct {
	typedcorev1.PodInterface
	binds *binds
}

func (p bindPods) Bind(ctx context.Context, b *corev1.Binding, opts metav1.CreateOptions) error {
	p.binds.mu.Lock()
	p.binds.by[b.Name]++
	p.binds.mu.Unlock()
	return p.PodInterface.Bind(ctx, b, opts)
}

// startTessera runs Tessera's scheduler (quick resync and backoffs, as
// kube/scheduler's own tests do; dyn reads the PodGroups) until the
// returned stop is called.
func startTessera(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, cycleDone func(scheduler.CycleStats)) (stop func()) {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{Client: client, Dynamic: dyn,
		Log:    slog.New(slog.NewTextHandler(testcluster.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Resync: 200 * time.Millisecond, PodInitialBackoff: 100 * time.Millisecond, PodMaxBackoff: 400 * time.Millisecond, CycleDone: cycleDone})
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

// createRun makes every row's volumes, claims and then pods for the
// scheduler named sched, each pod edited by edit when set.
func createRun(ctx context.Context, t *testing.T, c kubernetes.Interface, rs []row, sched string, edit func(*corev1.Pod)) {
	t.Helper()
	createStorage(ctx, t, c, rs, sched)
	createGroups(ctx, t, c, rs, sched)
	for _, r := range rs {
		for _, p := range r.pods {
			p = p.DeepCopy()
			p.Spec.SchedulerName = sched
			p.Labels[runLabel] = sched
			if edit != nil {
				edit(p)
			}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("row %s: %v", r.name, err)
			}
		}
	}
}

// withoutGPU is the oracle's copy of a pod: stock kube-scheduler knows no
// GPU share, so the pod asks its other resources and constraints alone.
func withoutGPU(p *corev1.Pod) {
	for i := range p.Spec.Containers {
		for _, k := range workload.GPUResources() {
			delete(p.Spec.Containers[i].Resources.Limits, corev1.ResourceName(k))
			delete(p.Spec.Containers[i].Resources.Requests, corev1.ResourceName(k))
		}
	}
	maps.DeleteFunc(p.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, "tessera.io/") })
}

// decided returns each row's outcome of sched's run once every pod of it
// is bound or told why not (PodScheduled false: unschedulable, or gated);
// in a row that preempts, once no pod of it is being deleted or pending
// with a nominated node (kube-scheduler's preemptor waiting for its
// victims), and a pod no longer listed is gone.
func decided(ctx context.Context, c kubernetes.Interface, rs []row, sched string) (map[string]outcome, error) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + sched})
	if err != nil {
		return nil, err
	}
	preempts := map[string]bool{}
	for _, r := range rs {
		preempts[r.name] = r.preempts
	}
	out := map[string]outcome{}
	for _, p := range pods.Items {
		res := result{node: p.Spec.NodeName}
		if preempts[p.Labels[rowLabel]] {
			if p.DeletionTimestamp != nil {
				return nil, fmt.Errorf("pod %s being deleted", p.Name)
			}
			if res.node == "" && p.Status.NominatedNodeName != "" {
				return nil, fmt.Errorf("pod %s pending, nominated to node %s", p.Name, p.Status.NominatedNodeName)
			}
		}
		if res.node == "" {
			if res.why = whyNot(&p); res.why == "" {
				return nil, fmt.Errorf("pod %s neither bound nor told why not (conditions %+v)", p.Name, p.Status.Conditions)
			}
		}
		r := p.Labels[rowLabel]
		if out[r] == nil {
			out[r] = outcome{}
		}
		out[r][p.Name] = res
	}
	for _, r := range rs {
		for _, p := range r.pods {
			if _, listed := out[r.name][p.Name]; !listed && r.preempts {
				if out[r.name] == nil {
					out[r.name] = outcome{}
				}
				out[r.name][p.Name] = result{why: gone}
			}
		}
		if len(out[r.name]) != len(r.pods) {
			return nil, fmt.Errorf("row %s: %d of its %d pods listed", r.name, len(out[r.name]), len(r.pods))
		}
	}
	return out, nil
}

// whyNot is the reason of the pod's PodScheduled false condition, "" when
// it has none.
func whyNot(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason
		}
	}
	return ""
}

// checked runs the rows' checks on their outcomes (o), gap rows' too.
func checked(ctx context.Context, c kubernetes.Interface, rs []row, o map[string]outcome) error {
	var errs []error
	for _, r := range rs {
		if r.check == nil {
			continue
		}
		if err := r.check(ctx, c, o[r.name]); err != nil {
			errs = append(errs, fmt.Errorf("row %s (%s): %w", r.name, r.what, err))
		}
	}
	return errors.Join(errs...)
}

// differences lists the rows without a gap whose outcomes differ as far as
// the row's constraint decides them.
func differences(rs []row, want, got map[string]outcome) error {
	var errs []error
	for _, r := range rs {
		w, g := want[r.name], got[r.name]
		if r.gap == "" && !r.compare.same(w, g) {
			errs = append(errs, fmt.Errorf("row %s (%s): kube-scheduler %s, Tessera %s", r.name, r.what, describe(w), describe(g)))
		}
	}
	return errors.Join(errs...)
}

// same compares two outcomes as far as c says the constraint decides
// them; the pending pods' reasons always count.
func (c compare) same(want, got outcome) bool {
	bw, pw := split(want)
	bg, pg := split(got)
	switch c {
	case byPod:
		return maps.Equal(want, got)
	case byNodes:
		return slices.Equal(bw, bg) && slices.Equal(pw, pg)
	}
	return len(bw) == len(bg) && slices.Equal(pw, pg)
}

// split lists the nodes of the bound pods and the reasons of the pending
// ones, each sorted.
func split(o outcome) (on, why []string) {
	for _, r := range o {
		if r.node != "" {
			on = append(on, r.node)
		} else {
			why = append(why, r.why)
		}
	}
	slices.Sort(on)
	slices.Sort(why)
	return on, why
}

// describe writes an outcome as "pod→node, pod pending (reason), pod
// evicted (deleted)", in pod order.
func describe(o outcome) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(o)) {
		if r := o[p]; r.why == gone {
			parts = append(parts, p+" "+gone)
		} else if r.node == "" {
			parts = append(parts, p+" pending ("+r.why+")")
		} else {
			parts = append(parts, p+"→"+r.node)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// deleteRun deletes sched's pods at once and waits until they are gone,
// then its claims and volumes, so that the next run starts from the
// fixtures alone.
func deleteRun(ctx context.Context, t *testing.T, c kubernetes.Interface, sched string) {
	t.Helper()
	zero := int64(0)
	sel := metav1.ListOptions{LabelSelector: runLabel + "=" + sched}
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, sched+"'s pods gone", time.Minute, func() error {
		pods, err := c.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
	deleteStorage(ctx, t, c, sched)
	deleteGroups(ctx, t, c, sched)
}

func nodesReady(ctx context.Context, c kubernetes.Interface, names []string) error {
	for _, name := range names {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return fmt.Errorf("node %s not Ready", name)
		}
	}
	return nil
}
