package samedecisions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/tracesim"
)

// The trace's setting: nodes of 8 H100s, two queues (ls guaranteed half
// the GPUs, be nothing; both preemptible, as every pod is a candidate in
// the cluster), the default policy learning online in both front doors.
const (
	nodes    = 8
	gpusEach = 8
	steps    = 45   // arrival steps, one a period
	period   = 10.0 // simulated seconds between cycles
	policy   = "tessera-online"
	seed     = 7
	ns       = "default"
)

// tracePod is one pod of the trace: the simulator's TimedPod and the
// Kubernetes pods that stand for it (one, or a gang's members).
type tracePod struct {
	tp   tracesim.TimedPod
	pods []*corev1.Pod
}

// placed is one placement, as both front doors report it.
type placed struct {
	time float64
	pod  string
	part int
	node string
	gpus []int
}

func (p placed) String() string {
	return fmt.Sprintf("t=%g %s/%d on %s %v", p.time, p.pod, p.part, p.node, p.gpus)
}

// TestSameDecisionsInSimulatorAndCluster replays one timed trace (whole,
// fractional and multi-GPU pods, a gang, two queues, reclaims, pods that
// wait and then fit, a reservation) with tracesim's dynamic replay and
// through the Kubernetes scheduler on a real control plane with KWOK
// nodes, one scheduler cycle per replay cycle, and checks that every pod
// is placed at the same cycle on the same node and GPUs, and that the
// same pods are stopped for preemptions at the same cycles.
func TestSameDecisionsInSimulatorAndCluster(t *testing.T) {
	nodeObjs := make([]*corev1.Node, nodes)
	for i := range nodeObjs {
		nodeObjs[i] = gpuNode(fmt.Sprintf("node-%d", i))
	}
	trace := makeTrace(t)
	want := replay(t, nodeObjs, trace)
	if len(want.stops) == 0 {
		t.Fatal("the trace stopped no pod: it no longer exercises preemption (make it reclaim again)")
	}
	got, reserved := inCluster(t, nodeObjs, trace)
	compare(t, want.binds, got.binds)
	if w, g := byCycle(want.stops), byCycle(got.stops); !slices.Equal(w, g) {
		t.Errorf("pods stopped for a preemption differ:\nsimulator: %v\ncluster:   %v", w, g)
	}
	if !reserved {
		t.Error("no pod in the cluster was told a node is reserved: the trace no longer exercises a reservation")
	}
	// The other ingredients.
	var gang, waited, again bool
	arrive, stopped := map[string]float64{}, map[string]float64{}
	for _, p := range trace {
		arrive[p.tp.Pod.Name] = float64(p.tp.Arrive)
	}
	for _, s := range slices.Backward(want.stops) {
		stopped[strings.Fields(s)[1]] = timeOf(s) // its first stop
	}
	firstStop := timeOf(want.stops[0])
	for _, b := range want.binds {
		gang = gang || b.part > 0
		waited = waited || (b.time > arrive[b.pod] && b.time < firstStop)
		if at, ok := stopped[b.pod]; ok && b.time > at {
			again = true
		}
	}
	if !gang || !waited || !again {
		t.Errorf("the trace no longer exercises a gang (%v), a pod that fails, then fits, before the first preemption (%v), or a stopped pod placed again (%v)", gang, waited, again)
	}
	t.Logf("%d pods, %d placements and %d stops agree (first stop at t=%g)", len(trace), len(want.binds), len(want.stops), firstStop)
}

// byCycle is stops ("t=<time> <pod>") sorted by time, then pod: within a
// cycle the order the cluster's victims are seen in is not the core's.
func byCycle(stops []string) []string {
	out := slices.Clone(stops)
	slices.Sort(out)
	sort.SliceStable(out, func(i, j int) bool { return timeOf(out[i]) < timeOf(out[j]) })
	return out
}

// compare checks the placements cycle by cycle. Within a cycle the
// cluster's order is not observable (bindings are written by several
// workers at once), so each cycle's placements are compared as a set,
// sorted by pod; the GPUs each pod got carry the order's effect.
func compare(t *testing.T, want, got []placed) {
	t.Helper()
	norm := func(ps []placed) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return byCycle(out)
	}
	w, g := norm(want), norm(got)
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			t.Errorf("placements differ from the %d-th on (of %d in the simulator, %d in the cluster):\nsimulator: %s\ncluster:   %s", i+1, len(w), len(g), a, b)
			return
		}
	}
}

func timeOf(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimPrefix(strings.Fields(s)[0], "t="), 64)
	return v
}

// makeTrace is a seeded mix over the arrival steps that asks more than
// the cluster holds: fractions (0.25, 0.5), whole and multi-GPU pods in
// both queues, and pods written in: 4-GPU pods of be first (half the
// cluster, for 30 s: pods wait, then fit), a gang of four one-GPU
// members in ls, an 8-GPU pod of be (a whole node: it waits, and
// reserves), and a later burst of ls pods while be holds more than its
// share (ls below its guarantee reclaims).
func makeTrace(t *testing.T) []tracePod {
	t.Helper()
	rng := rand.New(rand.NewPCG(35, 1))
	type shape struct {
		frac  string // tessera.io/gpu-fraction, "" for whole GPUs
		count int
	}
	shapes := []shape{{"0.25", 1}, {"0.5", 1}, {"", 1}, {"", 2}, {"", 4}}
	var out []tracePod
	add := func(at int64, qos string, sh shape, dur int64, gang bool) {
		name := fmt.Sprintf("p%03d", len(out))
		cpu := 1 + rng.IntN(4)
		mem := 4 * (1 + rng.IntN(8))
		whole := kubePod(name, qos, sh.frac, sh.count, int64(cpu)*1000, int64(mem)<<30)
		tp := tracesim.TimedPod{Pod: enginePod(t, whole), Arrive: at, Duration: dur, QoS: qos, Gang: gang}
		tp.Pod.Name = name
		p := tracePod{tp: tp}
		if gang {
			// The replay splits a gang's host requests evenly, the first
			// members taking the remainder: so do the members here.
			n := int64(sh.count)
			for m := range sh.count {
				c, mm := tp.Pod.CPUMilli/n, tp.Pod.MemoryMiB/n
				if int64(m) < tp.Pod.CPUMilli%n {
					c++
				}
				if int64(m) < tp.Pod.MemoryMiB%n {
					mm++
				}
				member := kubePod(fmt.Sprintf("%s-m%d", name, m), qos, "", 1, c, mm<<20)
				member.Labels[membership.LabelPodGroup] = name
				member.Annotations[membership.AnnotationMinMember] = strconv.Itoa(sh.count)
				mp := enginePod(t, member)
				g := tp.Pod.GPU
				g.Count = 1
				if fmt.Sprintf("%+v", mp.GPU) != fmt.Sprintf("%+v", g) {
					t.Fatalf("gang member %s asks %+v, the replay's member %+v", member.Name, mp.GPU, g)
				}
				p.pods = append(p.pods, member)
			}
		} else {
			p.pods = []*corev1.Pod{whole}
		}
		out = append(out, p)
	}
	for step := range int64(steps) {
		at := step * int64(period)
		switch step {
		case 0:
			for range nodes * gpusEach / 8 {
				add(at, "BE", shape{"", 4}, 30, false)
			}
		case 1:
			add(at, "LS", shape{"", 4}, 80, true)
		case 2:
			add(at, "BE", shape{"", 8}, 60, false)
		case 12:
			for range nodes {
				add(at, "LS", shape{"", 2}, 50, false)
			}
		}
		for range 4 + rng.IntN(6) {
			qos := "BE"
			if rng.IntN(3) == 0 {
				qos = "LS"
			}
			add(at, qos, shapes[rng.IntN(len(shapes))], int64(period)*int64(3+rng.IntN(12)), false)
		}
	}
	return out
}

// kubePod is a pod asking count GPUs (each the fraction frac, or whole)
// and the given CPU (milli) and memory (bytes), in the queue of its qos.
func kubePod(name, qos, frac string, count int, cpuMilli, memBytes int64) *corev1.Pod {
	ann := map[string]string{}
	if frac != "" {
		ann[workload.AnnotationCompute] = frac
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queues.LabelQueue: strings.ToLower(qos)}, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: scheduler.DefaultName, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI)},
				Limits: corev1.ResourceList{workload.ResourceGPU: *resource.NewQuantity(int64(count), resource.DecimalSI)},
			},
		}}},
	}
}

// enginePod is the pod as the scheduler translates it: its GPU request
// (package kube/workload), its host requests and its pod slot.
func enginePod(t *testing.T, p *corev1.Pod) placement.Pod {
	t.Helper()
	reqs, err := workload.FromPod(p, catalog.Default())
	if err != nil || len(reqs) != 1 {
		t.Fatalf("pod %s: %d requests, %v", p.Name, len(reqs), err)
	}
	c := p.Spec.Containers[0].Resources.Requests
	return placement.Pod{Name: ns + "/" + p.Name + "/main", GPU: reqs[0].GPU,
		CPUMilli: c.Cpu().MilliValue(), MemoryMiB: (c.Memory().Value() + 1<<20 - 1) >> 20, Slot: true}
}

func gpuNode(name string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), workload.ResourceGPU: resource.MustParse("64")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"},
			Labels: map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: strconv.Itoa(gpusEach)}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// outcome is one front door's decisions.
type outcome struct {
	binds []placed
	stops []string // "t=<time> <pod>", in order
}

// replay runs the trace through tracesim's dynamic replay, on the nodes
// as the scheduler reads them (package kube/nodeinventory, booked as
// package booked lays them out), every waiting pod tried at every cycle
// (TryAll), as the scheduler does with backoffs over by the next cycle.
func replay(t *testing.T, nodeObjs []*corev1.Node, trace []tracePod) outcome {
	t.Helper()
	books := booked.New()
	for _, n := range nodeObjs {
		inv, err := nodeinventory.Labels{Catalog: catalog.Default()}.Node(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := books.SetNode(inv, ""); err != nil {
			t.Fatal(err)
		}
	}
	pods := make([]tracesim.TimedPod, len(trace))
	for i := range trace {
		pods[i] = trace[i].tp
	}
	qc := &tracesim.QueueConfig{Queues: []tracesim.QueueSpec{
		{Name: "ls", QoS: []string{"LS"}, Guaranteed: tracesim.GPUAmount(strconv.Itoa(nodes * gpusEach / 2)), Preemptible: true},
		{Name: "be", QoS: []string{"*"}, Preemptible: true},
	}}
	res, err := tracesim.ReplayDynamic(context.Background(), tracesim.DynamicConfig{
		Trace: "same-decisions", Nodes: books.Cluster(), Pods: pods, Policy: policy, Seed: seed,
		Exact: true, Compression: 1, Period: period, Queues: qc, Preemption: true,
		ReservationWait: 1e-9, Record: true, TryAll: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out outcome
	for _, b := range res.Binds {
		out.binds = append(out.binds, placed{time: b.Time, pod: b.Pod, part: b.Part, node: b.Node, gpus: b.GPUs})
	}
	for _, s := range res.Stops {
		out.stops = append(out.stops, fmt.Sprintf("t=%g %s", s.Time, s.Pod))
	}
	return out
}

// inCluster replays the trace through the scheduler on a real control
// plane: the pods of a cycle are made (and those that end deleted)
// while the scheduler's loop is held between two cycles (gate), so
// that its next cycle takes them all, as a replay cycle does. It reports
// whether some pod was told a node is reserved.
func inCluster(t *testing.T, nodeObjs []*corev1.Node, trace []tracePod) (outcome, bool) {
	t.Helper()
	ctx, _, cfg := testcluster.ForTest(t, true)
	// No client-side rate limit: the test and the scheduler wait for each
	// other at every cycle.
	cfg.QPS, cfg.Burst = 1000, 1000
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	createQueue(ctx, t, dyn, "ls", map[string]any{"guaranteed": map[string]any{"gpu": strconv.Itoa(nodes * gpusEach / 2)}})
	createQueue(ctx, t, dyn, "be", map[string]any{})
	for _, n := range nodeObjs {
		if _, err := client.CoreV1().Nodes().Create(ctx, n.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.Eventually(t, "nodes Ready", time.Minute, func() error {
		for _, n := range nodeObjs {
			got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(got) {
				return fmt.Errorf("node %s not ready (%v)", n.Name, err)
			}
		}
		return nil
	})
	// The fence is another scheduler's pod: the scheduler's pod watch
	// seeing its update says it has seen every write before it.
	fence := kubePod("zz-fence", "BE", "", 1, 100, 1<<20)
	fence.Spec.SchedulerName = "nobody"
	if _, err := client.CoreV1().Pods(ns).Create(ctx, fence, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	g := newGate()
	seen := &rvSeen{}
	sctx, cancel := context.WithCancel(ctx)
	s, err := scheduler.New(scheduler.Config{Client: trackedClient{Interface: client, seen: seen}, Dynamic: dyn, Policy: policy, Seed: seed,
		Log: slog.New(slog.DiscardHandler), Resync: time.Hour, ReservationWait: time.Nanosecond, CycleDone: g.cycleDone,
		// The replay's victims stop at once: a preemptor waits for them
		// no longer than the next cycle.
		PreemptorWait: time.Nanosecond,
		// Backoffs over by the next cycle: every waiting pod is tried at
		// every cycle, as the replay does with TryAll.
		PodInitialBackoff: time.Nanosecond, PodMaxBackoff: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() {
		cancel()
		g.close()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	if _, err := g.wait(ctx); err != nil { // its first cycle, before the trace
		t.Fatal(err)
	}

	var out outcome
	type run struct {
		pod  int
		ends float64
	}
	var running []run // by start
	waiting := map[int]bool{}
	bound := map[string]bool{} // pod object names bound and not deleted
	byName := map[string][2]int{}
	for i, p := range trace {
		for m, k := range p.pods {
			byName[k.Name] = [2]int{i, m}
		}
	}
	var recreate []int // trace pods stopped by the last cycle: made again
	remade := map[int]int{}
	var lastMade time.Time      // the creation time of the last pod made
	trace = slices.Clone(trace) // its pods are renamed as they are made again
	now, next, stopped := 0.0, 0, false
	for {
		// Departures, arrivals and the pods stopped last cycle, made
		// again (the replay's victim waits again from its stop).
		kept := running[:0]
		for _, r := range running {
			if r.ends > now {
				kept = append(kept, r)
				continue
			}
			for _, k := range trace[r.pod].pods {
				deletePod(ctx, t, client, k.Name)
				delete(bound, k.Name)
			}
		}
		running = kept
		// The scheduler orders pods of one priority by creation time (to
		// the second), then by name; the replay by arrival, then trace
		// order (a pod made again after every pod of its stop's time). So
		// the pods of one cycle are made in a second of their own, and
		// within it a pod made again sorts before the new ones by name.
		if len(recreate) > 0 || (next < len(trace) && float64(trace[next].tp.Arrive) <= now) {
			time.Sleep(time.Until(lastMade.Add(time.Second)))
		}
		for _, i := range recreate {
			// Under a new name, as a controller makes a pod again. (A
			// pod made again under its name before the scheduler's cycle
			// takes in its deletion leaves the deleted one booked there:
			// kube/scheduler's takePod, reported with issue 35.)
			remade[i]++
			pods := make([]*corev1.Pod, len(trace[i].pods))
			for m, k := range trace[i].pods {
				pods[m] = k.DeepCopy()
				pods[m].Name = fmt.Sprintf("%s-r%d", strings.Split(k.Name, "-r")[0], remade[i])
				byName[pods[m].Name] = [2]int{i, m}
			}
			trace[i].pods = pods
			lastMade = createPods(ctx, t, client, pods)
		}
		recreate = recreate[:0]
		for next < len(trace) && float64(trace[next].tp.Arrive) <= now {
			lastMade = createPods(ctx, t, client, trace[next].pods)
			waiting[next] = true
			next++
		}
		expect := fenceAndCount(ctx, t, client, fence.Name, seen)
		rec, err := g.step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Pending != expect {
			t.Fatalf("t=%g: the scheduler's cycle took %d pending pods, %d were made: its informer lagged behind the gate", now, rec.Pending, expect)
		}
		// Its bindings are written by workers: wait for as many as it made.
		var newly []*corev1.Pod
		testcluster.Eventually(t, fmt.Sprintf("t=%g: %d bindings", now, rec.Bound), time.Minute, func() error {
			list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			newly = newly[:0]
			for i := range list.Items {
				p := &list.Items[i]
				if _, ok := byName[p.Name]; ok && p.Spec.NodeName != "" && !bound[p.Name] && p.DeletionTimestamp == nil {
					newly = append(newly, p)
				}
			}
			if len(newly) != rec.Bound {
				return fmt.Errorf("%d of %d bound", len(newly), rec.Bound)
			}
			return nil
		})
		started := map[int]int{}
		for _, p := range newly {
			a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
			if err != nil || len(a.Containers) != 1 {
				t.Fatalf("pod %s: assignment %q: %v", p.Name, p.Annotations[binding.AnnotationKey], err)
			}
			var gpus []int
			for _, s := range a.Containers[0].GPUs {
				gpus = append(gpus, s.Index)
			}
			im := byName[p.Name]
			out.binds = append(out.binds, placed{time: now, pod: trace[im[0]].tp.Pod.Name, part: im[1], node: p.Spec.NodeName, gpus: gpus})
			bound[p.Name] = true
			started[im[0]]++
		}
		for i, n := range started {
			if n != len(trace[i].pods) {
				t.Fatalf("t=%g: pod %s: %d of its %d members bound", now, trace[i].tp.Pod.Name, n, len(trace[i].pods))
			}
			delete(waiting, i)
			running = append(running, run{pod: i, ends: now + float64(trace[i].tp.Duration)})
		}
		// Victims: the scheduler deleted them in its cycle; KWOK removes them.
		stopped = false
		kept = running[:0]
		for _, r := range running {
			gone := false
			for _, k := range trace[r.pod].pods {
				p, err := client.CoreV1().Pods(ns).Get(ctx, k.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil) {
					gone = true
				}
			}
			if !gone {
				kept = append(kept, r)
				continue
			}
			for _, k := range trace[r.pod].pods {
				waitGone(ctx, t, client, k.Name)
				delete(bound, k.Name)
			}
			out.stops = append(out.stops, fmt.Sprintf("t=%g %s", now, trace[r.pod].tp.Pod.Name))
			recreate = append(recreate, r.pod)
			waiting[r.pod] = true
			stopped = true
		}
		running = kept
		sort.SliceStable(running, func(i, j int) bool { return running[i].ends < running[j].ends })

		// The next cycle, by the replay's rule.
		tNext := math.Inf(1)
		if next < len(trace) {
			tNext = float64(trace[next].tp.Arrive)
		}
		if len(running) > 0 {
			tNext = min(tNext, running[0].ends)
		}
		if stopped {
			tNext = now
		}
		if next == len(trace) && (len(waiting) == 0 || len(running) == 0) && !stopped {
			break
		}
		now += math.Max(period, math.Ceil((tNext-now)/period)*period)
	}
	return out, reservedSaid(ctx, t, client)
}

// reservedSaid reports whether an event told a pod that a node is
// reserved for another.
func reservedSaid(ctx context.Context, t *testing.T, client kubernetes.Interface) bool {
	t.Helper()
	evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "reserved for") {
			return true
		}
	}
	return false
}

// createPods makes pods and returns the last one's creation time.
func createPods(ctx context.Context, t *testing.T, client kubernetes.Interface, pods []*corev1.Pod) time.Time {
	t.Helper()
	var last time.Time
	for _, p := range pods {
		made, err := client.CoreV1().Pods(ns).Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
		last = made.CreationTimestamp.Time
	}
	return last
}

func deletePod(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	waitGone(ctx, t, client, name)
}

func waitGone(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	testcluster.Eventually(t, "pod "+name+" gone", time.Minute, func() error {
		_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s still there (%v)", name, err)
	})
}

// fenceAndCount writes the fence pod and waits until the scheduler's pod
// watch has delivered that write (and so every write before it); it
// returns how many pods wait for the scheduler now.
func fenceAndCount(ctx context.Context, t *testing.T, client kubernetes.Interface, fence string, seen *rvSeen) int {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(ctx, fence, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	n, _ := strconv.Atoi(p.Annotations["step"])
	p.Annotations["step"] = strconv.Itoa(n + 1)
	if p, err = client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	testcluster.Eventually(t, "the scheduler's watch delivers the fence", time.Minute, func() error {
		if got := seen.get(); got < rv {
			return fmt.Errorf("at resourceVersion %d, the fence is %d", got, rv)
		}
		return nil
	})
	// The reflector has the events; its handlers get them next (each in
	// turn, on the informer's goroutines): leave them a moment. The
	// cycle's pending count, checked after, says if that was not enough.
	time.Sleep(50 * time.Millisecond)
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, p := range list.Items {
		if p.Spec.SchedulerName == scheduler.DefaultName && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			count++
		}
	}
	return count
}

func createQueue(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": "Queue",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if _, err := dyn.Resource(queues.Resource()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// gate holds the scheduler's loop at the end of every cycle (its
// CycleDone hook) until step lets it run one more cycle.
type gate struct {
	ended   chan scheduler.CycleStats
	release chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{ended: make(chan scheduler.CycleStats), release: make(chan struct{}), done: make(chan struct{})}
}

// cycleDone is the scheduler's CycleDone: it hands on the cycle's stats
// and holds the loop until released.
func (g *gate) cycleDone(st scheduler.CycleStats) {
	select {
	case g.ended <- st:
	case <-g.done:
		return
	}
	select {
	case <-g.release:
	case <-g.done:
	}
}

// wait waits for the loop to end a cycle and holds it there.
func (g *gate) wait(ctx context.Context) (scheduler.CycleStats, error) {
	select {
	case st := <-g.ended:
		return st, nil
	case <-time.After(time.Minute):
		return scheduler.CycleStats{}, errors.New("the scheduler ended no cycle for a minute")
	case <-ctx.Done():
		return scheduler.CycleStats{}, ctx.Err()
	}
}

// step lets the held loop run its next cycle and holds it at its end.
func (g *gate) step(ctx context.Context) (scheduler.CycleStats, error) {
	select {
	case g.release <- struct{}{}:
	case <-ctx.Done():
		return scheduler.CycleStats{}, ctx.Err()
	}
	return g.wait(ctx)
}

func (g *gate) close() { g.once.Do(func() { close(g.done) }) }

// rvSeen is the highest resourceVersion the scheduler's pod watch has
// handed to its informer.
type rvSeen struct {
	mu sync.Mutex
	rv uint64
}

func (s *rvSeen) note(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	v, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = max(s.rv, v)
}

func (s *rvSeen) get() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

// trackedClient is the scheduler's client: its pod watches note what
// they hand on.
type trackedClient struct {
	kubernetes.Interface
	seen *rvSeen
}

func (c trackedClient) CoreV1() typedcorev1.CoreV1Interface {
	return trackedCore{CoreV1Interface: c.Interface.CoreV1(), seen: c.seen}
}

type trackedCore struct {
	typedcorev1.CoreV1Interface
	seen *rvSeen
}

func (c trackedCore) Pods(namespace string) typedcorev1.PodInterface {
	return trackedPods{PodInterface: c.CoreV1Interface.Pods(namespace), seen: c.seen}
}

type trackedPods struct {
	typedcorev1.PodInterface
	seen *rvSeen
}

func (p trackedPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := p.PodInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	tw := &trackedWatch{inner: w, out: make(chan watch.Event), stop: make(chan struct{}), seen: p.seen}
	go tw.run()
	return tw, nil
}

// trackedWatch hands on its inner watch's events, noting each one's
// resourceVersion once the receiver has taken it.
type trackedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
	seen  *rvSeen
}

func (w *trackedWatch) run() {
	defer close(w.out)
	for {
		select {
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			select {
			case w.out <- ev:
				w.seen.note(ev.Object)
			case <-w.stop:
				return
			}
		case <-w.stop:
			return
		}
	}
}

func (w *trackedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }
