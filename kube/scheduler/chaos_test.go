package scheduler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cmd/tessera/cli"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// The chaos test's knobs.
const (
	// chaosPodsEnv scales the storm (default defaultChaosPods pods).
	chaosPodsEnv = "TESSERA_CHAOS_PODS"
	// chaosSeedEnv fixes the storm and the fault schedule (default 1).
	chaosSeedEnv = "TESSERA_CHAOS_SEED"
	// chaosBinEnv names a tessera binary to run as scheduler and agent
	// (default: this test binary, race detector included).
	chaosBinEnv = "TESSERA_CHAOS_BIN"
	// childEnv makes this test binary act as the tessera command.
	childEnv = "TESSERA_SCHEDULER_TEST_MAIN"

	defaultChaosPods = 2000
	// stormWindow bounds the pods created but not yet settled.
	stormWindow = 50
)

const (
	chaosNS       = "chaos"
	agentNodeName = "agent-0"
	agentLabel    = "chaos.tessera.io/agent"
	labelGPUs     = 8 // GPUs of each label-described node
	agentSpec     = "4xH100-SXM"
	agentGPUs     = 4
	// overload is demand over capacity: the storm asks for more than the
	// cluster has, so some pods must stay pending and say why.
	overload = 1.15
)

// TestMain lets this test binary stand in for the tessera binary: the chaos
// test runs `<this binary> scheduler ...` and `<this binary> agent ...` as
// real processes it can kill.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// chaosAuditPolicy records every binding in the chaos namespace and the
// scheduler replicas' pod lists and watches (the relists).
const chaosAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  namespaces: ["` + chaosNS + `"]
  resources: [{group: "", resources: ["pods/binding"]}]
  verbs: ["create"]
- level: Metadata
  users: ["replica-a", "replica-b"]
  resources: [{group: "", resources: ["pods"]}]
  verbs: ["list", "watch"]
- level: None
`

// TestChaosBindStorm is the crash-consistency test of issue #14. Two
// `tessera scheduler` replicas (Lease leader election) and a `tessera
// agent` with a simulated kubelet run as real processes against etcd,
// kube-apiserver and KWOK while a storm of fractional GPU pods and GPU
// gangs, more than the cluster holds, is created. A seeded schedule
// injects: kube-apiserver restarts, an etcd compaction followed by a
// restart (watches expire; informers list again, which is checked), a
// SIGKILL of the leading replica frozen while a gang is partly bound, and
// a SIGKILL and restart of the agent with pods running. At the end, from
// the API server, from a watch recorder started before the storm and from
// the audit log: no GPU is over-committed, no pod was bound twice or
// moved, no gang is partly bound, and every pod is bound or pending with a
// PodScheduled condition saying why.
//
// The seed fixes the storm and the fault schedule (which fault, in which
// order, after how many bindings, SIGKILL or SIGTERM); how the processes
// interleave around each fault still varies from run to run.
func TestChaosBindStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, two scheduler replicas and an agent")
	}
	began := time.Now()
	seed, nPods := chaosKnobs(t)
	rng := rand.New(rand.NewPCG(seed, 0x7e55e7a))
	plan := newStormPlan(rng, nPods)
	faults := newFaultSchedule(rng, len(plan.pods))
	t.Logf("chaos: seed %d (%s), %d pods (%s): %d singles, %d gangs (%d members), %d pinned to %s; demand %.1f GPUs on %d label nodes x %d GPUs + %d agent GPUs",
		seed, chaosSeedEnv, len(plan.pods), chaosPodsEnv, plan.singles, len(plan.gangs), plan.gangPods, plan.pinned, agentNodeName,
		plan.demand, plan.nodes, labelGPUs, agentGPUs)
	for i, f := range faults {
		t.Logf("chaos: fault %d: %s after %d pods are bound", i+1, f, f.at)
	}

	ctx, c, rc := testcluster.ForTestWith(t, true, testcluster.Options{
		Users: []string{"replica-a", "replica-b", "agent"}, AuditPolicy: chaosAuditPolicy,
	})
	rc.QPS, rc.Burst = 500, 1000
	client := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	h := &chaos{t: t, c: c, client: client, dyn: dyn, began: began, plan: plan}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		h.wg.Wait() // no goroutine logs after the test ends
	}()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chaosNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createChaosNodes(ctx, t, client, plan.nodes)

	h.bin, h.env = chaosBinary(t)
	h.rec = startRecorder(ctx, h)
	h.startAgent(ctx)
	h.startReplicas(ctx)

	// The storm: every pod, in plan order, by a few creators.
	created := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(created)
		h.createStorm(ctx)
	}()
	for i, f := range faults {
		h.inject(ctx, i+1, f)
	}
	<-created
	h.logf("storm created: %d pods", len(plan.pods))
	final := h.waitQuiet(ctx)
	h.check(ctx, final)
	h.logf("done: %d of %d pods bound, %d pending with a reason; runtime %s", h.boundCount(final), len(final), len(final)-h.boundCount(final), time.Since(began).Round(time.Second))
	for _, line := range h.timeline() {
		t.Log(line)
	}
}

// chaosKnobs reads the seed and the storm size.
func chaosKnobs(t *testing.T) (seed uint64, pods int) {
	t.Helper()
	seed, pods = 1, defaultChaosPods
	if v := os.Getenv(chaosSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: must be a whole number, got %q", chaosSeedEnv, v)
		}
		seed = s
	}
	if v := os.Getenv(chaosPodsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 100000 {
			t.Fatalf("%s: must be a whole number in [100, 100000], got %q", chaosPodsEnv, v)
		}
		pods = n
	}
	return seed, pods
}

// chaosBinary is the program run as `tessera`: $TESSERA_CHAOS_BIN, else
// this test binary with childEnv set.
func chaosBinary(t *testing.T) (string, []string) {
	t.Helper()
	if bin := os.Getenv(chaosBinEnv); bin != "" {
		return bin, nil
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	return self, []string{childEnv + "=1"}
}

// podSpec is one pod of the storm.
type podSpec struct {
	name  string
	gpus  int    // tessera.io/gpu
	frac  string // tessera.io/gpu-fraction; "" for whole GPUs
	milli int64  // compute per GPU, for the demand estimate
	group string // gang; "" for a single pod
	pin   bool   // nodeSelector on the agent's node
}

type stormPlan struct {
	pods                             []podSpec
	gangs                            map[string]int    // gang -> minMember (= its size)
	gangOf                           map[string]string // pod -> gang
	singles, gangPods, pinned, nodes int
	demand                           float64 // GPUs
}

// newStormPlan draws the storm: fractional singles (1/4, 1/2, 3/4 of a
// GPU), whole-GPU singles, two-GPU singles and gangs of 4 to 12 members
// (half a GPU or one GPU each); a few fractional singles early in the storm
// are pinned to the agent's node. It sizes the cluster so that the demand
// is overload times the capacity.
func newStormPlan(rng *rand.Rand, n int) stormPlan {
	p := stormPlan{gangs: map[string]int{}, gangOf: map[string]string{}}
	add := func(s podSpec) {
		s.name = fmt.Sprintf("p-%05d", len(p.pods))
		p.pods = append(p.pods, s)
		p.demand += float64(s.gpus) * float64(s.milli) / 1000
		if s.group != "" {
			p.gangOf[s.name] = s.group
		}
	}
	for len(p.pods) < n {
		if rng.Float64() < 0.05 {
			size := 4 + rng.IntN(9)
			g := fmt.Sprintf("g-%04d", len(p.gangs))
			p.gangs[g] = size
			s := podSpec{gpus: 1, frac: "0.5", milli: 500, group: g}
			if rng.IntN(5) < 2 {
				s.frac, s.milli = "", 1000
			}
			for i := 0; i < size; i++ {
				add(s)
			}
			p.gangPods += size
			continue
		}
		p.singles++
		var s podSpec
		switch r := rng.Float64(); {
		case r < 0.45:
			s = podSpec{gpus: 1, frac: "0.25", milli: 250}
		case r < 0.70:
			s = podSpec{gpus: 1, frac: "0.5", milli: 500}
		case r < 0.80:
			s = podSpec{gpus: 1, frac: "0.75", milli: 750}
		case r < 0.95:
			s = podSpec{gpus: 1, milli: 1000}
		default:
			s = podSpec{gpus: 2, milli: 1000}
		}
		if len(p.pods) < n*3/10 && p.singles%15 == 0 && p.pinned < 10 {
			s = podSpec{gpus: 1, frac: []string{"0.25", "0.5"}[rng.IntN(2)], pin: true}
			s.milli = map[string]int64{"0.25": 250, "0.5": 500}[s.frac]
			p.pinned++
		}
		add(s)
	}
	capacity := p.demand / overload
	p.nodes = max(1, int((capacity-agentGPUs)/labelGPUs+0.5))
	return p
}

// fault is one injected failure.
type fault struct {
	kind faultKind
	at   int  // pods bound before it starts
	kill bool // kube-apiserver restarts: SIGKILL rather than SIGTERM
}

type faultKind int

const (
	faultAPIRestart faultKind = iota
	faultCompactRestart
	faultLeaderKill
	faultAgentRestart
)

func (f fault) String() string {
	how := "SIGTERM"
	if f.kill {
		how = "SIGKILL"
	}
	switch f.kind {
	case faultAPIRestart:
		return "kube-apiserver restart (" + how + ")"
	case faultCompactRestart:
		return "kube-apiserver stop (" + how + "), etcd compaction, start"
	case faultLeaderKill:
		return "SIGKILL of the leading scheduler replica while a gang is partly bound"
	default:
		return "SIGKILL and restart of the node agent with pods running"
	}
}

// newFaultSchedule orders the four faults at random and spreads their
// starts over the first half of the storm's bindings (the cluster fills
// at about 1/overload of them).
func newFaultSchedule(rng *rand.Rand, pods int) []fault {
	kinds := rng.Perm(4)
	at := make([]int, 4)
	for i := range at {
		at[i] = int(float64(pods) * (0.05 + 0.45*rng.Float64()))
	}
	sort.Ints(at)
	out := make([]fault, 4)
	for i, k := range kinds {
		out[i] = fault{kind: faultKind(k), at: at[i], kill: rng.IntN(2) == 0}
	}
	return out
}

// chaos is the running test: the cluster, the processes and the record.
type chaos struct {
	t      *testing.T
	c      *testcluster.Cluster
	client kubernetes.Interface
	dyn    dynamic.Interface
	began  time.Time
	wg     sync.WaitGroup // the test's goroutines
	plan   stormPlan
	bin    string
	env    []string
	rec    *recorder

	mu       sync.Mutex
	replicas map[string]*supervised // identity -> process
	agent    *supervised
	kubelet  *chaosKubelet
	events   []string // the fault timeline
	// expiry is the compaction restart: from when to when the leader
	// (expiryLeader) had to list its pods again.
	expiryFrom, expiryTo time.Time
	expiryLeader         string
	uids                 map[string]types.UID
	notes                []string
}

func (h *chaos) since() string { return fmt.Sprintf("+%6.1fs", time.Since(h.began).Seconds()) }

// logf logs and keeps a line of the timeline.
func (h *chaos) logf(format string, args ...any) {
	line := h.since() + " " + fmt.Sprintf(format, args...)
	h.t.Log("chaos " + line)
	h.mu.Lock()
	h.events = append(h.events, line)
	h.mu.Unlock()
}

func (h *chaos) timeline() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []string{"chaos timeline:"}
	for _, e := range h.events {
		out = append(out, "  "+e)
	}
	return out
}

// createChaosNodes registers n KWOK nodes described by labels and the
// agent's node, whose GPUs the agent publishes, and waits until all are Ready.
func createChaosNodes(ctx context.Context, t *testing.T, client kubernetes.Interface, n int) {
	t.Helper()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), workload.ResourceGPU: resource.MustParse("64"),
	}
	mk := func(name string, labels map[string]string) {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
			Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		mk(fmt.Sprintf("gpu-%03d", i), map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: strconv.Itoa(labelGPUs)})
	}
	mk(agentNodeName, map[string]string{agentLabel: "true"})
	eventually(ctx, t, time.Minute, "nodes Ready", func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		notReady := 0
		for _, n := range nodes.Items {
			if _, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
				notReady++
			}
		}
		if notReady > 0 || len(nodes.Items) != n+1 {
			return fmt.Errorf("%d of %d nodes not Ready", notReady, len(nodes.Items))
		}
		return nil
	})
}

// eventually polls check until it passes; bound is a liveness guard.
func eventually(ctx context.Context, t *testing.T, bound time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(ctx, bound, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// poll runs check until it passes, ctx ends or bound passes; it returns
// check's last error then.
func poll(ctx context.Context, bound time.Duration, check func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// supervised is a tessera process the test restarts when it exits, as a
// Deployment or DaemonSet would (a replica that loses its lease exits).
type supervised struct {
	h    *chaos
	name string
	args []string

	mu     sync.Mutex
	p      *testcluster.Process
	killed bool // exited because the test killed it
	exits  []string
}

func (h *chaos) supervise(ctx context.Context, name string, args ...string) *supervised {
	s := &supervised{h: h, name: name, args: args}
	s.start()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			s.mu.Lock()
			gone, err := s.p.Exited()
			killed := s.killed
			s.mu.Unlock()
			if !gone || killed || ctx.Err() != nil {
				continue
			}
			tail := s.p.LogTail(5)
			h.logf("%s exited by itself (%v); restarting it; log tail:\n%s", name, err, tail)
			s.mu.Lock()
			s.exits = append(s.exits, fmt.Sprintf("%v", err))
			s.mu.Unlock()
			s.start()
		}
	}()
	return s
}

func (s *supervised) start() {
	p, err := s.h.c.StartProcess(s.name, s.h.bin, s.h.env, s.args...)
	if err != nil {
		s.h.t.Errorf("start %s: %v", s.name, err)
		return
	}
	s.mu.Lock()
	s.p, s.killed = p, false
	s.mu.Unlock()
}

func (s *supervised) proc() *testcluster.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// kill SIGKILLs the process; the supervisor leaves it down until restart.
func (s *supervised) kill() {
	s.mu.Lock()
	s.killed = true
	p := s.p
	s.mu.Unlock()
	p.Kill()
}

func (s *supervised) restart() { s.start() }

// running tells whether the process is up (not exited, not killed).
func (s *supervised) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, _ := s.p.Exited()
	return !gone && !s.killed
}

// startReplicas starts replica-a, waits until it leads, then replica-b.
func (h *chaos) startReplicas(ctx context.Context) {
	h.replicas = map[string]*supervised{}
	for _, id := range []string{"replica-a", "replica-b"} {
		kc, err := h.c.KubeconfigFor(id)
		if err != nil {
			h.t.Fatal(err)
		}
		h.mu.Lock()
		h.replicas[id] = h.supervise(ctx, "scheduler-"+id, "scheduler", "--kubeconfig", kc, "--leader-elect-identity", id,
			"--metrics-addr", "", "--kube-api-qps", "100", "--kube-api-burst", "20")
		h.mu.Unlock()
		if id == "replica-a" {
			eventually(ctx, h.t, 2*time.Minute, "replica-a leads", func() error {
				l, err := h.leader(ctx)
				if err == nil && l != id {
					err = fmt.Errorf("lease held by %q", l)
				}
				return err
			})
		}
	}
	h.logf("scheduler replicas started; replica-a leads")
}

// leader reads the scheduler Lease's holder.
func (h *chaos) leader(ctx context.Context) (string, error) {
	l, err := h.client.CoordinationV1().Leases("kube-system").Get(ctx, "tessera-scheduler", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", errors.New("lease has no holder")
	}
	return *l.Spec.HolderIdentity, nil
}

func (h *chaos) replica(id string) *supervised {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replicas[id]
}

// createStorm creates every pod of the plan, retrying through faults; a
// create whose answer was lost to a restart is found by name.
func (h *chaos) createStorm(ctx context.Context) {
	h.mu.Lock()
	h.uids = map[string]types.UID{}
	h.mu.Unlock()
	work := make(chan podSpec)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				uid, err := h.createPod(ctx, s)
				if err != nil {
					if ctx.Err() == nil {
						h.t.Errorf("create pod %s: %v", s.name, err)
					}
					continue
				}
				h.mu.Lock()
				h.uids[s.name] = uid
				h.mu.Unlock()
			}
		}()
	}
	for i, s := range h.plan.pods {
		// Keep the storm a storm of bindings: at most stormWindow pods
		// created and not yet settled (bound, or pending with a reason),
		// so that the faults land while pods are being bound.
		for i-h.rec.settledCount() > stormWindow && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case work <- s:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

func (h *chaos) createPod(ctx context.Context, s podSpec) (types.UID, error) {
	ann := map[string]string{}
	labels := map[string]string{}
	if s.frac != "" {
		ann[workload.AnnotationCompute] = s.frac
	}
	if s.group != "" {
		labels[membership.LabelPodGroup] = s.group
		ann[membership.AnnotationMinMember] = strconv.Itoa(h.plan.gangs[s.group])
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: chaosNS, Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: scheduler.DefaultName, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				Limits:   corev1.ResourceList{workload.ResourceGPU: *resource.NewQuantity(int64(s.gpus), resource.DecimalSI)},
			},
		}}},
	}
	if s.pin {
		pod.Spec.NodeSelector = map[string]string{agentLabel: "true"}
	}
	var uid types.UID
	err := poll(ctx, 3*time.Minute, func() error {
		got, err := h.client.CoreV1().Pods(chaosNS).Create(ctx, pod, metav1.CreateOptions{})
		if err == nil {
			uid = got.UID
			return nil
		}
		if apierrors.IsAlreadyExists(err) {
			got, gerr := h.client.CoreV1().Pods(chaosNS).Get(ctx, s.name, metav1.GetOptions{})
			if gerr == nil {
				uid = got.UID
				return nil
			}
			return gerr
		}
		return err
	})
	return uid, err
}

// inject waits for the fault's turn and injects it.
func (h *chaos) inject(ctx context.Context, n int, f fault) {
	if err := poll(ctx, 3*time.Minute, func() error {
		if b := h.rec.boundCount(); b < f.at {
			return fmt.Errorf("%d pods bound, waiting for %d", b, f.at)
		}
		return nil
	}); err != nil {
		h.logf("fault %d: %v; injecting anyway", n, err)
	}
	h.logf("fault %d: %s (%d pods bound)", n, f, h.rec.boundCount())
	switch f.kind {
	case faultAPIRestart:
		h.restartAPIServer(ctx, f.kill)
	case faultCompactRestart:
		// Compacting while the API server is down expires every watch
		// its clients resume, whatever its watch cache holds.
		before := h.rec.relists()
		leader, err := h.leader(ctx)
		if err != nil {
			h.t.Fatalf("read the scheduler lease: %v", err)
		}
		from := time.Now()
		if err := h.c.StopAPIServer(f.kill); err != nil {
			h.t.Fatal(err)
		}
		rev, err := h.c.CompactEtcd(ctx)
		if err != nil {
			h.t.Fatalf("fault %d: %v", n, err)
		}
		h.logf("kube-apiserver stopped; etcd compacted at revision %d", rev)
		if err := h.c.StartAPIServer(ctx); err != nil {
			h.t.Fatal(err)
		}
		h.logf("kube-apiserver back after %s", time.Since(from).Round(100*time.Millisecond))
		if err := poll(ctx, 2*time.Minute, func() error {
			if h.rec.relists() == before {
				return errors.New("the recorder has not listed again")
			}
			return nil
		}); err != nil {
			h.t.Errorf("fault %d: after compaction and restart: %v", n, err)
		}
		h.logf("watch expired: the recorder listed again (%d full lists so far; last resourceVersion %s)", h.rec.relists()+1, h.rec.lastRV())
		h.mu.Lock()
		h.expiryFrom, h.expiryTo, h.expiryLeader = from, time.Now().Add(30*time.Second), leader
		h.mu.Unlock()
	case faultLeaderKill:
		h.killLeaderMidGang(ctx)
	case faultAgentRestart:
		h.restartAgent(ctx)
	}
}

// restartAPIServer restarts kube-apiserver and returns when it is ready.
func (h *chaos) restartAPIServer(ctx context.Context, kill bool) {
	t0 := time.Now()
	if err := h.c.RestartAPIServer(ctx, kill); err != nil {
		h.t.Fatal(err)
	}
	h.logf("kube-apiserver back after %s", time.Since(t0).Round(100*time.Millisecond))
}

// killLeaderMidGang freezes the leading replica (SIGSTOP) as soon as the
// recorder sees a gang member bound while its gang is short of minMember,
// lets the bindings already sent land, and SIGKILLs the replica if the
// gang is then still partly bound; otherwise it resumes it (SIGCONT) and
// waits for the next gang. The other replica must take over through the
// Lease; the killed one is then started again as a follower.
func (h *chaos) killLeaderMidGang(ctx context.Context) {
	leader, err := h.leader(ctx)
	if err != nil {
		h.t.Fatalf("read the scheduler lease: %v", err)
	}
	victim := h.replica(leader)
	if victim == nil {
		h.t.Fatalf("lease holder %q is not a replica this test started", leader)
	}
	const tries = 8
	caught := ""
	for try := 1; try <= tries && caught == ""; try++ {
		frozen := make(chan string, 1)
		h.rec.armGang(func(group string) {
			if err := victim.proc().Signal(syscall.SIGSTOP); err != nil {
				h.t.Errorf("freeze %s: %v", leader, err)
			}
			frozen <- group
		})
		var group string
		select {
		case group = <-frozen:
		case <-time.After(30 * time.Second):
			h.rec.armGang(nil)
			h.logf("no gang started binding within 30s; killing %s without a gang in flight", leader)
		case <-ctx.Done():
			return
		}
		if group == "" {
			break
		}
		// The bindings the frozen replica already sent still land: wait
		// until the gang's count stops moving.
		bound := h.rec.gangBound(group)
		for quiet := 0; quiet < 5; {
			time.Sleep(100 * time.Millisecond)
			if now := h.rec.gangBound(group); now != bound {
				bound, quiet = now, 0
				continue
			}
			quiet++
		}
		if bound < h.plan.gangs[group] {
			caught = fmt.Sprintf("gang %s with %d of %d members bound", group, bound, h.plan.gangs[group])
			break
		}
		h.logf("try %d: gang %s was fully bound before %s froze; resuming it", try, group, leader)
		if err := victim.proc().Signal(syscall.SIGCONT); err != nil {
			h.t.Fatalf("resume %s: %v", leader, err)
		}
	}
	killedAt := time.Now()
	victim.kill()
	if caught != "" {
		h.logf("SIGKILL %s, frozen mid-gang: %s", leader, caught)
	} else {
		h.logf("SIGKILL %s (no gang caught partly bound in %d tries)", leader, tries)
		h.note(fmt.Sprintf("the leader kill caught no gang partly bound (%d tries)", tries))
	}
	var next string
	eventually(ctx, h.t, 2*time.Minute, "the other replica takes over", func() error {
		l, err := h.leader(ctx)
		if err != nil {
			return err
		}
		if l == leader {
			return fmt.Errorf("lease still held by %s", l)
		}
		next = l
		return nil
	})
	h.logf("%s took the lease %s after the kill", next, time.Since(killedAt).Round(100*time.Millisecond))
	victim.restart()
	h.logf("%s started again as a follower", leader)
}

func (h *chaos) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, s)
}

// boundCount counts the bound pods of a list.
func (h *chaos) boundCount(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// waitQuiet waits until every pod is bound or pending with a PodScheduled
// condition, a running replica holds the lease, and the bound count has
// held still for several scheduling cycles (resync is 1s); it returns the
// pods then. The bound is a liveness guard, not a performance target.
func (h *chaos) waitQuiet(ctx context.Context) []corev1.Pod {
	const stillFor = 6 // polls, a second apart
	var pods []corev1.Pod
	last, still := -1, 0
	deadline := time.Now().Add(4 * time.Minute)
	for {
		why := ""
		list, err := h.client.CoreV1().Pods(chaosNS).List(ctx, metav1.ListOptions{})
		if err == nil {
			pods = list.Items
		}
		leader, lerr := h.leader(ctx)
		unexplained := 0
		for i := range pods {
			if pods[i].Spec.NodeName == "" && scheduledCondition(&pods[i]) == nil {
				unexplained++
			}
		}
		b := h.boundCount(pods)
		if b != last {
			last, still = b, 0
		} else {
			still++
		}
		switch {
		case err != nil:
			why = err.Error()
		case lerr != nil:
			why = "scheduler lease: " + lerr.Error()
		case h.replica(leader) == nil || !h.replica(leader).running():
			why = "lease holder " + leader + " is not running"
		case len(pods) != len(h.plan.pods):
			why = fmt.Sprintf("%d pods exist, %d were created", len(pods), len(h.plan.pods))
		case unexplained > 0:
			why = fmt.Sprintf("%d pods pending without a PodScheduled condition", unexplained)
		case still < stillFor:
			why = fmt.Sprintf("bound count %d unchanged for %d of %d polls", b, still, stillFor)
		}
		if why == "" {
			h.logf("settled: %d pods bound, %s leads", b, leader)
			return pods
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.t.Errorf("the cluster did not settle: %s", why)
			return pods
		}
		time.Sleep(time.Second)
	}
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" && c.Message != "" {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// check asserts the invariants on the final state, the recorder and the audit log.
func (h *chaos) check(ctx context.Context, pods []corev1.Pod) {
	t := h.t
	agentUUIDs := h.agentUUIDs(ctx)
	// Every created pod still exists, as the pod that was created.
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	h.mu.Lock()
	uids := h.uids
	h.mu.Unlock()
	for _, s := range h.plan.pods {
		p, ok := byName[s.name]
		switch {
		case !ok:
			t.Errorf("pod %s was lost: it no longer exists", s.name)
		case uids[s.name] != "" && p.UID != uids[s.name]:
			t.Errorf("pod %s is not the pod created (uid %s, created %s)", s.name, p.UID, uids[s.name])
		}
	}
	// No GPU over-committed; each assignment on the pod's node and GPUs.
	used := map[string]int64{}
	users := map[string][]string{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			if scheduledCondition(&p) == nil {
				t.Errorf("pod %s is pending without a PodScheduled condition saying why: %+v", p.Name, p.Status.Conditions)
			}
			continue
		}
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Errorf("bound pod %s: %v", p.Name, err)
			continue
		}
		if a.Node != p.Spec.NodeName {
			t.Errorf("pod %s is bound to %s but its assignment names %s", p.Name, p.Spec.NodeName, a.Node)
		}
		for _, ctr := range a.Containers {
			for _, g := range ctr.GPUs {
				if !gpuOfNode(g.UUID, p.Spec.NodeName, agentUUIDs) {
					t.Errorf("pod %s on %s got GPU %s of another node", p.Name, p.Spec.NodeName, g.UUID)
				}
				used[g.UUID] += g.ComputeMilli
				users[g.UUID] = append(users[g.UUID], fmt.Sprintf("%s:%dm", p.Name, g.ComputeMilli))
			}
		}
	}
	over := 0
	for uuid, m := range used {
		if m > 1000 {
			over++
			t.Errorf("GPU %s over-committed: %d/1000 by %v", uuid, m, users[uuid])
		}
	}
	// Gangs: all or nothing.
	gangBound := map[string]int{}
	for _, p := range pods {
		if g := h.plan.gangOf[p.Name]; g != "" && p.Spec.NodeName != "" {
			gangBound[g]++
		}
	}
	full, none := 0, 0
	for g, min := range h.plan.gangs {
		switch b := gangBound[g]; {
		case b == 0:
			none++
		case b >= min:
			full++
		default:
			t.Errorf("gang %s is partly bound: %d of %d members", g, b, min)
		}
	}
	// The recorder: no pod moved, was unbound, recreated or deleted, and
	// the final nodes are the ones first seen.
	for _, v := range h.rec.violations() {
		t.Errorf("watch recorder: %s", v)
	}
	first := h.rec.firstNodes()
	for _, p := range pods {
		if n, ok := first[p.UID]; p.Spec.NodeName != "" && (!ok || n != p.Spec.NodeName) {
			t.Errorf("pod %s is on %s but the recorder saw it bound to %q", p.Name, p.Spec.NodeName, n)
		}
	}
	// The audit log: at most one successful binding per pod, and the
	// leader listed pods again after the compaction and restart.
	h.checkAudit(pods)
	// The agent's node: every pod bound there was admitted with its assignment.
	h.kubelet.check(t, pods)
	// Processes: no data race, no panic.
	h.checkProcessLogs()
	h.logf("checked: %d GPUs in use, none over-committed (%d over); gangs: %d fully bound, %d not bound, %d partly", len(used), over, full, none, len(h.plan.gangs)-full-none)
	for _, n := range h.notes {
		t.Logf("note: %s", n)
	}
}

// gpuOfNode tells whether uuid is a GPU of node.
func gpuOfNode(uuid, node string, agentUUIDs map[string]bool) bool {
	if node == agentNodeName {
		return agentUUIDs[uuid]
	}
	for i := 0; i < labelGPUs; i++ {
		if uuid == fmt.Sprintf("%s/gpu%d", node, i) {
			return true
		}
	}
	return false
}

// auditEvent is the part of an audit.k8s.io/v1 Event the checks read.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

func (h *chaos) checkAudit(pods []corev1.Pod) {
	t := h.t
	f, err := os.Open(h.c.AuditLog())
	if err != nil {
		t.Errorf("audit log: %v", err)
		return
	}
	defer f.Close()
	h.mu.Lock()
	from, to, leader := h.expiryFrom, h.expiryTo, h.expiryLeader
	h.mu.Unlock()
	binds := map[string]int{}
	byUser := map[string]int{}
	conflicts := 0
	relists := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ObjectRef == nil {
			continue
		}
		switch {
		case e.Verb == "create" && e.ObjectRef.Subresource == "binding" && e.Stage == "ResponseComplete" && e.ResponseStatus != nil:
			switch e.ResponseStatus.Code {
			case 201:
				binds[e.ObjectRef.Name]++
				byUser[e.User.Username]++
			case 409:
				conflicts++
			}
		case e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" && e.User.Username == leader &&
			e.RequestReceivedTimestamp.After(from) && e.RequestReceivedTimestamp.Before(to):
			full := (e.Verb == "list" && e.Stage == "ResponseComplete") ||
				(e.Verb == "watch" && e.Stage == "ResponseStarted" && strings.Contains(e.RequestURI, "sendInitialEvents=true"))
			if full {
				relists[e.User.Username]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("read audit log: %v", err)
	}
	for name, n := range binds {
		if n > 1 {
			t.Errorf("pod %s was bound %d times (audit log)", name, n)
		}
	}
	audited := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" && binds[p.Name] == 1 {
			audited++
		}
	}
	h.logf("audit: %d successful bindings (by replica: %v), %d refused as conflicts; %d of %d bound pods have their binding in the log", len(binds), byUser, conflicts, audited, h.boundCount(pods))
	if leader == "" {
		return
	}
	if relists[leader] == 0 {
		t.Errorf("audit: the leading replica %s did not list pods again after the compaction and restart", leader)
	}
	h.logf("audit: the leading replica %s listed all pods again %d time(s) after the compaction restart (list, or watch with initial events)", leader, relists[leader])
}

// checkProcessLogs fails on a data race or panic in a tessera process.
func (h *chaos) checkProcessLogs() {
	for _, name := range []string{"scheduler-replica-a", "scheduler-replica-b", "agent"} {
		data, err := os.ReadFile(filepath.Join(h.c.Dir, name+".log"))
		if err != nil {
			h.t.Errorf("%s log: %v", name, err)
			continue
		}
		if strings.HasPrefix(name, "scheduler") {
			h.logf("%s: %d bindings failed and were scheduled again, %d failed but had applied (kept booked)", name,
				strings.Count(string(data), "binding failed; the pod stays pending"), strings.Count(string(data), "binding failed but the pod is bound"))
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
			if i := strings.Index(string(data), bad); i >= 0 {
				end := min(len(data), i+3000)
				h.t.Errorf("%s: %s\n%s", name, bad, data[i:end])
			}
		}
	}
	for _, s := range append([]*supervised{h.agent}, h.replica("replica-a"), h.replica("replica-b")) {
		s.mu.Lock()
		if len(s.exits) > 0 {
			h.t.Logf("note: %s exited by itself %d time(s) and was restarted: %v", s.name, len(s.exits), s.exits)
		}
		s.mu.Unlock()
	}
}

// recorder watches the chaos namespace's pods from before the storm and
// records every binding.
type recorder struct {
	t     *testing.T
	began time.Time
	plan  stormPlan

	mu        sync.Mutex
	node      map[types.UID]string // nodeName when first seen bound
	uidOf     map[string]types.UID
	gang      map[string]int // gang -> members seen bound
	bad       []string
	lists     int
	rv        string
	onGang    func(group string) // armed by the leader kill
	agentPods chan *corev1.Pod
	bound     atomic.Int64
	settled   map[types.UID]bool // bound, or pending with a PodScheduled condition
}

func startRecorder(ctx context.Context, h *chaos) *recorder {
	t, began, plan := h.t, h.began, h.plan
	r := &recorder{t: t, began: began, plan: plan, node: map[types.UID]string{}, uidOf: map[string]types.UID{},
		gang: map[string]int{}, agentPods: make(chan *corev1.Pod, len(plan.pods)), settled: map[types.UID]bool{}}
	pods := h.client.CoreV1().Pods(chaosNS)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			r.listed("list", o.ResourceVersion)
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				r.listed("watch with initial events", o.ResourceVersion)
			}
			return pods.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		t.Logf("chaos +%6.1fs recorder: watch ended: %v", time.Since(began).Seconds(), err)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.observe(o) },
		UpdateFunc: func(_, o any) { r.observe(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				r.violation(fmt.Sprintf("pod %s was deleted", p.Name))
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		inf.RunWithContext(ctx)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the watch recorder did not sync")
	}
	return r
}

func (r *recorder) listed(how, rv string) {
	r.mu.Lock()
	r.lists++
	n := r.lists
	r.rv = rv
	r.mu.Unlock()
	r.t.Logf("chaos +%6.1fs recorder: full list #%d (%s, from resourceVersion %q)", time.Since(r.began).Seconds(), n, how, rv)
}

// relists counts the full lists after the first.
func (r *recorder) relists() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists - 1
}

func (r *recorder) lastRV() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rv
}

func (r *recorder) violation(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = append(r.bad, fmt.Sprintf("+%.1fs %s", time.Since(r.began).Seconds(), s))
}

func (r *recorder) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

func (r *recorder) observe(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	var hook func(string)
	group := ""
	r.mu.Lock()
	if uid, seen := r.uidOf[p.Name]; seen && uid != p.UID {
		r.bad = append(r.bad, fmt.Sprintf("pod %s was recreated (uid %s, then %s)", p.Name, uid, p.UID))
	}
	r.uidOf[p.Name] = p.UID
	if p.Spec.NodeName != "" || scheduledCondition(p) != nil {
		r.settled[p.UID] = true
	}
	prev, wasBound := r.node[p.UID]
	switch {
	case p.Spec.NodeName != "" && !wasBound:
		r.node[p.UID] = p.Spec.NodeName
		r.bound.Add(1)
		if g := r.plan.gangOf[p.Name]; g != "" {
			r.gang[g]++
			if r.onGang != nil && r.gang[g] < r.plan.gangs[g] {
				hook, group, r.onGang = r.onGang, g, nil
			}
		}
		if p.Spec.NodeName == agentNodeName {
			r.agentPods <- p
		}
	case p.Spec.NodeName != "" && prev != p.Spec.NodeName:
		r.bad = append(r.bad, fmt.Sprintf("pod %s moved from %s to %s", p.Name, prev, p.Spec.NodeName))
	case p.Spec.NodeName == "" && wasBound:
		r.bad = append(r.bad, fmt.Sprintf("pod %s lost its node %s", p.Name, prev))
	}
	r.mu.Unlock()
	if hook != nil {
		hook(group)
	}
}

// armGang calls f (once) with the next gang whose member is seen bound
// while the gang is short of its minimum; nil disarms.
func (r *recorder) armGang(f func(group string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onGang = f
}

func (r *recorder) gangBound(g string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gang[g]
}

func (r *recorder) boundCount() int { return int(r.bound.Load()) }

func (r *recorder) settledCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.settled)
}

func (r *recorder) firstNodes() map[types.UID]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]string, len(r.node))
	for k, v := range r.node {
		out[k] = v
	}
	return out
}

// chaosKubelet is the agent node's kubelet: it admits every pod bound
// there through the simulated kubelet and the agent's device plugin, and
// starts its container.
type chaosKubelet struct {
	k   *kubeletsim.Kubelet
	dir string

	mu       sync.Mutex
	admitted map[string]*corev1.Pod // name -> pod as bound
	handoff  map[string]string      // name -> TESSERA_GPU_UUIDS handed over
	errs     []string
}

// startAgent starts the simulated kubelet and `tessera agent` for the
// agent's node, and waits for its devices and GPUNode.
func (h *chaos) startAgent(ctx context.Context) {
	dir, err := os.MkdirTemp("", "tc")
	if err != nil {
		h.t.Fatal(err)
	}
	k, err := kubeletsim.Start(filepath.Join(dir, "dp"), filepath.Join(dir, "pr.sock"), workload.ResourceGPU)
	if err != nil {
		os.RemoveAll(dir)
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		k.Stop()
		os.RemoveAll(dir)
	})
	h.kubelet = &chaosKubelet{k: k, dir: dir, admitted: map[string]*corev1.Pod{}, handoff: map[string]string{}}
	kc, err := h.c.KubeconfigFor("agent")
	if err != nil {
		h.t.Fatal(err)
	}
	h.agent = h.supervise(ctx, "agent", "agent", "--node-name", agentNodeName, "--source", "sim:"+agentSpec,
		"--kubeconfig", kc, "--kubelet-socket-dir", filepath.Join(dir, "dp"),
		"--pod-resources-socket", filepath.Join(dir, "pr.sock"), "--state-dir", filepath.Join(dir, "state"),
		"--run-dir", filepath.Join(dir, "run"), "--metrics-addr", "", "--slots-per-gpu", "8")
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := k.WaitDevices(wctx, func(d map[string]string) bool { return len(d) == agentGPUs*8 }); err != nil {
		h.t.Fatalf("agent's device plugin: %v\n%s", err, h.agent.proc().LogTail(20))
	}
	eventually(ctx, h.t, 2*time.Minute, "GPUNode published", func() error {
		if n := len(h.agentUUIDs(ctx)); n != agentGPUs {
			return fmt.Errorf("GPUNode %s lists %d GPUs", agentNodeName, n)
		}
		return nil
	})
	h.logf("agent running on %s with %d GPUs", agentNodeName, agentGPUs)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.kubelet.run(ctx, h)
	}()
}

// agentUUIDs reads the GPU UUIDs of the agent's GPUNode.
func (h *chaos) agentUUIDs(ctx context.Context) map[string]bool {
	obj, err := h.dyn.Resource(gpunode.Resource()).Get(ctx, agentNodeName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	n, err := gpunode.FromObject(obj)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, g := range n.GPUs {
		out[g.UUID] = true
	}
	return out
}

// run admits the pods bound to the agent's node, one at a time, retrying
// while the agent is down.
func (k *chaosKubelet) run(ctx context.Context, h *chaos) {
	for {
		var p *corev1.Pod
		select {
		case <-ctx.Done():
			return
		case p = <-h.rec.agentPods:
		}
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			k.fail(fmt.Sprintf("pod %s on %s: %v", p.Name, agentNodeName, err))
			continue
		}
		devices := 0
		if q, ok := p.Spec.Containers[0].Resources.Limits[workload.ResourceGPU]; ok {
			devices = int(q.Value())
		}
		kp := kubeletsim.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Containers: []kubeletsim.Container{{Name: "main", Devices: devices}}}
		var got map[string]*kubeletsim.Allocation
		if err := poll(ctx, 2*time.Minute, func() error {
			var err error
			got, err = k.k.Admit(ctx, kp, kubeletsim.AdmitOptions{})
			return err
		}); err != nil {
			k.fail(fmt.Sprintf("admit %s: %v", p.Name, err))
			continue
		}
		if err := poll(ctx, 2*time.Minute, func() error { return k.k.Start(ctx, p.Namespace, p.Name) }); err != nil {
			k.fail(fmt.Sprintf("start %s: %v", p.Name, err))
		}
		want := handedUUIDs(a)
		if env := got["main"].Envs["TESSERA_GPU_UUIDS"]; env != want {
			k.fail(fmt.Sprintf("pod %s was handed GPUs %q, its assignment names %q", p.Name, env, want))
		}
		k.mu.Lock()
		k.admitted[p.Name] = p
		k.handoff[p.Name] = got["main"].Envs["TESSERA_GPU_UUIDS"]
		k.mu.Unlock()
	}
}

// handedUUIDs is TESSERA_GPU_UUIDS for an assignment's main container.
func handedUUIDs(a binding.Assignment) string {
	for _, c := range a.Containers {
		if c.Name != "main" {
			continue
		}
		gpus := append([]binding.Share(nil), c.GPUs...)
		sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
		var ids []string
		for _, g := range gpus {
			ids = append(ids, g.UUID)
		}
		return strings.Join(ids, ",")
	}
	return ""
}

func (k *chaosKubelet) fail(s string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, s)
}

func (k *chaosKubelet) running() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for n := range k.admitted {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// check: every pod bound to the agent's node was admitted with the GPUs
// its assignment names, and no admission failed.
func (k *chaosKubelet) check(t *testing.T, pods []corev1.Pod) {
	deadline := time.Now().Add(time.Minute)
	for _, p := range pods {
		if p.Spec.NodeName != agentNodeName {
			continue
		}
		for {
			k.mu.Lock()
			_, ok := k.admitted[p.Name]
			k.mu.Unlock()
			if ok || time.Now().After(deadline) {
				if !ok {
					t.Errorf("pod %s is bound to %s but was never admitted there", p.Name, agentNodeName)
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.errs {
		t.Errorf("agent node: %s", e)
	}
}

// restartAgent SIGKILLs the agent with pods running on its node, checks
// its checkpoint kept every allocation, starts it again and restarts the
// running containers (kubelet's PreStartContainer must pass for each).
func (h *chaos) restartAgent(ctx context.Context) {
	if err := poll(ctx, 2*time.Minute, func() error {
		if n := len(h.kubelet.running()); n < min(2, h.plan.pinned) {
			return fmt.Errorf("%d pods running on %s", n, agentNodeName)
		}
		return nil
	}); err != nil {
		h.t.Errorf("agent restart: %v", err)
	}
	before := h.kubelet.k.Registrations()
	uuids := h.agentUUIDs(ctx)
	running := h.kubelet.running()
	h.agent.kill()
	h.logf("SIGKILL agent with %d pods running on %s", len(running), agentNodeName)
	f, err := checkpoint.Load(filepath.Join(h.kubelet.dir, "state", agent.CheckpointFile))
	if err != nil {
		h.t.Fatalf("agent checkpoint after the kill: %v", err)
	}
	inCheckpoint := map[string]bool{}
	for _, e := range f.Entries {
		inCheckpoint[e.Pod] = true
	}
	for _, n := range running {
		if !inCheckpoint[n] {
			h.t.Errorf("agent checkpoint lost the allocation of running pod %s", n)
		}
	}
	h.agent.restart()
	eventually(ctx, h.t, 2*time.Minute, "agent registers again", func() error {
		if got := h.kubelet.k.Registrations(); got <= before {
			return fmt.Errorf("%d registrations", got)
		}
		return nil
	})
	for _, n := range running {
		if err := poll(ctx, time.Minute, func() error { return h.kubelet.k.Start(ctx, chaosNS, n) }); err != nil {
			h.t.Errorf("container of %s restarted after the agent restart: %v", n, err)
		}
	}
	if after := h.agentUUIDs(ctx); len(after) != len(uuids) || !sameKeys(after, uuids) {
		h.t.Errorf("agent restart changed the GPUNode's GPUs: %v, was %v", after, uuids)
	}
	h.logf("agent back: checkpoint kept %d allocations, %d containers restarted through PreStartContainer", len(f.Entries), len(running))
}

func sameKeys(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return len(a) == len(b)
}
