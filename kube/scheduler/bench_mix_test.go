package scheduler

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// The mix scenario of BenchmarkBindThroughput (TESSERA_BENCH_SCENARIO=mix).
const (
	mixQueueA, mixQueueB = "team-a", "team-b"
	// clockTick is the unit of utime and stime in /proc/PID/stat
	// (USER_HZ, 100 on every Linux architecture Go supports).
	clockTick = 100
)

// mixPod is one pod of the mix, as each scheduler is given it.
type mixPod struct {
	gpus     int    // whole GPUs (tessera.io/gpu for Tessera, nvidia.com/gpu for kube-scheduler)
	fraction string // Tessera's compute share of one GPU ("" for whole GPUs)
	gang     string // Tessera's pod group ("" for none); kube-scheduler sees a plain pod
	gangSize int
	queue    string
	// constraint and app: a Kubernetes constraint among the app's
	// replicas (bench_constrained_test.go); "" for none.
	constraint, app string
}

// mixPlan draws n pods (seeded, the same for both schedulers): a fifth
// each a quarter and a half of a GPU, a fifth one GPU, then two, four and
// eight GPUs (8%, 5.6%, 2.4%), and gangs of four or eight one-GPU members
// (about a quarter of the pods); pods alternate between the two queues by
// unit (a gang stays in one queue).
func mixPlan(n int) []mixPod {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []mixPod
	for unit := 0; len(out) < n; unit++ {
		q := mixQueueA
		if unit%2 == 1 {
			q = mixQueueB
		}
		switch r := rng.Float64(); {
		case r < 0.05:
			size := 4 + 4*rng.IntN(2)
			g := fmt.Sprintf("g-%05d", unit)
			for i := 0; i < size && len(out) < n; i++ {
				out = append(out, mixPod{gpus: 1, gang: g, gangSize: size, queue: q})
			}
		case r < 0.30:
			out = append(out, mixPod{gpus: 1, fraction: "0.25", queue: q})
		case r < 0.55:
			out = append(out, mixPod{gpus: 1, fraction: "0.5", queue: q})
		case r < 0.80:
			out = append(out, mixPod{gpus: 1, queue: q})
		case r < 0.90:
			out = append(out, mixPod{gpus: 2, queue: q})
		case r < 0.97:
			out = append(out, mixPod{gpus: 4, queue: q})
		default:
			out = append(out, mixPod{gpus: 8, queue: q})
		}
	}
	// A gang cut short by n would never fit: shrink its size to what is
	// left of it.
	if last := out[len(out)-1]; last.gang != "" {
		k := 0
		for i := len(out) - 1; i >= 0 && out[i].gang == last.gang; i-- {
			k++
		}
		for i := len(out) - k; i < len(out); i++ {
			out[i].gangSize = k
		}
	}
	return out
}

// object is the pod as one scheduler sees it: Tessera gets tessera.io/gpu,
// the fraction annotation, the gang and the queue; kube-scheduler gets the
// same number of nvidia.com/gpu (a fraction takes a whole GPU: it cannot
// share) and no gang or queue.
func (m mixPod) object(name, ns string, tessera bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}}}}
	if i, err := strconv.Atoi(strings.TrimPrefix(name, "p-")); err == nil {
		defer m.applyConstraint(p, i)
	}
	n := resource.MustParse(strconv.Itoa(m.gpus))
	if !tessera {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": n}
		return p
	}
	p.Spec.SchedulerName = DefaultName
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{workload.ResourceGPU: n}
	p.Labels = map[string]string{queues.LabelQueue: m.queue}
	p.Annotations = map[string]string{}
	if m.fraction != "" {
		p.Annotations[workload.AnnotationCompute] = m.fraction
	}
	if m.gang != "" {
		p.Labels[membership.LabelPodGroup] = m.gang
		p.Annotations[membership.AnnotationMinMember] = strconv.Itoa(m.gangSize)
	}
	return p
}

// mixRow is one line of the mix table.
type mixRow struct {
	limits, arrival, scheduler string
	pods                       int
	rate                       float64         // pods bound per second
	lat                        []time.Duration // creation to bound, sorted
	// ready is from the moment each pod could first be placed to bound,
	// sorted: a gang member's from its gang's last member's creation (no
	// gang can be placed before; a scheduler that binds members earlier
	// counts 0 for them); other pods' as lat. solo is lat of the pods in
	// no gang.
	ready, solo []time.Duration
	cpu         float64 // scheduler CPU seconds, start to last bind
	rssMiB      float64 // scheduler peak RSS
}

// benchMix is BenchmarkBindThroughput's mix scenario. KWOK nodes of 8
// GPUs (TESSERA_BENCH_NODES, default 5000; nvidia.com/gpu: 8 for
// kube-scheduler) and two Queues (team-a, team-b, each guaranteed 40% of
// the GPUs). For each set of client limits (TESSERA_BENCH_LIMITS, as the
// default scenario) and each arrival (TESSERA_BENCH_ARRIVAL, default
// "burst,steady"), Tessera and then kube-scheduler place the same mixPlan
// in a namespace of their own:
//
//   - burst: TESSERA_BENCH_PODS (default 10000) pods exist before the
//     scheduler starts; pods/s from the first bind to the last;
//   - steady: after a warm-up pod is bound, TESSERA_BENCH_STEADY_PODS
//     (default 2000) pods arrive at TESSERA_BENCH_RATE per second (default
//     40, which kube-scheduler's stock 50 QPS sustains), so latency is the
//     scheduler's, not a queue position. A gang's members arrive together
//     (TESSERA_BENCH_GANG_ARRIVAL=together, the default, as a job's
//     controller creates them) or each at its own slot (apart: a gang
//     member then waits for the last one, which no gang scheduler can
//     avoid; the "from ready" columns take that wait out).
//
// Both schedulers run as processes of their own: Tessera is `tessera
// scheduler` ($TESSERA_BENCH_BIN, else this test binary acting as the
// command) at its command-line defaults plus the limits. Latency is from
// just before the pod's create call to the harness's watch seeing it
// bound (both on this machine's clock); CPU seconds (utime+stime) are the
// scheduler process's from its start to the last bind, peak RSS its VmHWM.
// TESSERA_BENCH_PROFILE=dir saves Tessera's CPU profile
// (TESSERA_BENCH_PROFILE_SECONDS from its start in burst runs, from the
// warm-up's bind in steady ones), allocation and heap profiles (at the
// last bind) there, through --profiling-addr;
// TESSERA_BENCH_RUNNING=n creates n CPU-only pods bound before the rows
// (createRunningPods). TESSERA_BENCH_TABLE=file writes the markdown table
// (also logged).
// TESSERA_BENCH_BASELINE_BIN=program adds a row before Tessera's for
// another build of the tessera command (or of this test binary, e.g. one
// built from an earlier commit), run the same way: a change's before and
// after measured in one run.
func benchMix(b *testing.B) {
	nodes, pods := envInt(b, "TESSERA_BENCH_NODES", 5000), envInt(b, "TESSERA_BENCH_PODS", 10000)
	constrained := 0.0
	if v := os.Getenv("TESSERA_BENCH_CONSTRAINED"); v != "" {
		var err error
		if constrained, err = strconv.ParseFloat(v, 64); err != nil || constrained < 0 || constrained > 1 {
			b.Fatalf("TESSERA_BENCH_CONSTRAINED: %q: a share in [0, 1]", v)
		}
	}
	steadyPods, rate := envInt(b, "TESSERA_BENCH_STEADY_PODS", 2000), envInt(b, "TESSERA_BENCH_RATE", 40)
	limitNames := envList(b, "TESSERA_BENCH_LIMITS", "stock,equal,unlimited", "stock", "equal", "unlimited")
	arrivals := envList(b, "TESSERA_BENCH_ARRIVAL", "burst,steady", "burst", "steady")
	gangArrival := envList(b, "TESSERA_BENCH_GANG_ARRIVAL", "together", "together", "apart")
	if len(gangArrival) != 1 {
		b.Fatalf("TESSERA_BENCH_GANG_ARRIVAL: %q: one of together, apart", strings.Join(gangArrival, ","))
	}
	gangsTogether := gangArrival[0] == "together"
	profDir := os.Getenv("TESSERA_BENCH_PROFILE")
	profSecs := envInt(b, "TESSERA_BENCH_PROFILE_SECONDS", 20)
	if profDir != "" {
		if err := os.MkdirAll(profDir, 0o755); err != nil {
			b.Fatalf("TESSERA_BENCH_PROFILE: %v", err)
		}
	}
	bin, env := benchBinary(b)
	scheds := []string{"tessera", "kube-scheduler"}
	baseline := os.Getenv("TESSERA_BENCH_BASELINE_BIN")
	if baseline != "" {
		scheds = append([]string{baselineRow}, scheds...)
	}

	ctx, cl, cfg := testcluster.ForTest(b, true)
	cfg.QPS, cfg.Burst = 2000, 4000 // the harness's own client: fast set-up
	setup := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{mixQueueA, mixQueueB} {
		guaranteed := strconv.Itoa(nodes * 8 * 4 / 10)
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": "Queue",
			"metadata": map[string]any{"name": q}, "spec": map[string]any{"guaranteed": map[string]any{"gpu": guaranteed}}}}
		if _, err := dyn.Resource(queues.Resource()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create queue %s: %v", q, err)
		}
	}
	createBenchNodes(ctx, b, setup, nodes, "8")
	b.Logf("%d nodes of 8 GPUs ready; load average %s", nodes, loadAvg())
	if running := envInt(b, "TESSERA_BENCH_RUNNING", 0); running > 0 {
		createRunningPods(ctx, b, setup, nodes, running)
		b.Logf("%d pods running; load average %s", running, loadAvg())
	}

	var rows []mixRow
	for _, lim := range limitNames {
		for _, arr := range arrivals {
			n := pods
			if arr == "steady" {
				n = steadyPods
			}
			plan := mixPlan(n)
			constrain(plan, constrained)
			if constrained > 0 {
				b.Logf("constrained pods: %v", countConstrained(plan))
			}
			for _, sc := range scheds {
				ns := fmt.Sprintf("%s-%s-%s", lim, arr, sc)
				if _, err := setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				tessera := sc != "kube-scheduler"
				createClaims(ctx, b, setup, ns, plan)
				watch := startBindWatch(ctx, b, setup, ns)
				created := make([]time.Time, len(plan))
				create := func(i int) error {
					created[i] = time.Now()
					_, err := setup.CoreV1().Pods(ns).Create(ctx, plan[i].object(fmt.Sprintf("p-%05d", i), ns, tessera), metav1.CreateOptions{})
					return err
				}
				if arr == "burst" {
					parallel(b, len(plan), create)
				}
				var profAddr string
				var extra []string
				if tessera && profDir != "" {
					profAddr = fmt.Sprintf("127.0.0.1:%d", loopbackPort(b))
					extra = append(extra, "--profiling-addr="+profAddr)
				}
				run := bin
				if sc == baselineRow {
					run = baseline
				}
				proc := startRowScheduler(ctx, b, cl, ns, tessera, lim, run, env, extra...)
				var profWG sync.WaitGroup
				profileCPU := func() { // from now, for profSecs
					if profAddr == "" {
						return
					}
					profWG.Add(1)
					go func() {
						defer profWG.Done()
						fetchProfile(ctx, b, profAddr, fmt.Sprintf("profile?seconds=%d", profSecs), filepath.Join(profDir, ns+"-cpu.pprof"))
					}()
				}
				if arr == "burst" {
					profileCPU()
				}
				want := len(plan)
				if arr == "steady" {
					// The stream starts once the scheduler binds a first pod
					// (its caches are synced), so that start-up is not latency.
					warm := mixPod{gpus: 1, queue: mixQueueA}.object("warm-up", ns, tessera)
					if _, err := setup.CoreV1().Pods(ns).Create(ctx, warm, metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					watch.wait(b, 1, proc)
					want++
					profileCPU()
					paced(ctx, b, arrivalSlots(plan, gangsTogether), rate, create)
				}
				watch.wait(b, want, proc)
				cpu, rss := procUsage(b, proc.Pid())
				if profAddr != "" {
					profWG.Wait()
					fetchProfile(ctx, b, profAddr, "allocs", filepath.Join(profDir, ns+"-allocs.pprof"))
					fetchProfile(ctx, b, profAddr, "heap?gc=1", filepath.Join(profDir, ns+"-heap.pprof"))
				}
				proc.Stop(10 * time.Second)
				watch.stop()
				row := mixRow{limits: lim, arrival: arr, scheduler: sc, pods: len(plan), cpu: cpu, rssMiB: rss}
				row.rate, row.lat = watch.result(created, plan)
				row.ready, row.solo = watch.fromReady(created, plan)
				b.Logf("%s: slowest pods: %s", ns, watch.slowest(created, plan, 5))
				rows = append(rows, row)
				writeMixTable(b, nodes, gangsTogether, rows) // after each row: a failed run keeps what it measured
				b.Logf("%s: %.1f pods/s, p99 %v, CPU %.1f s, peak RSS %.0f MiB (load average %s)", ns, row.rate, pct(row.lat, 99), cpu, rss, loadAvg())
				deletePods(ctx, b, setup, ns, len(plan))
				if arr == "steady" {
					zero := int64(0)
					if err := setup.CoreV1().Pods(ns).Delete(ctx, "warm-up", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
						b.Fatal(err)
					}
				}
			}
			t, k := rows[len(rows)-2], rows[len(rows)-1] // tessera, kube-scheduler (a baseline row comes before them)
			b.ReportMetric(t.rate, fmt.Sprintf("%s-%s-tessera-pods/s", lim, arr))
			b.ReportMetric(k.rate, fmt.Sprintf("%s-%s-kube-scheduler-pods/s", lim, arr))
			b.ReportMetric(t.rate/k.rate, fmt.Sprintf("%s-%s-ratio", lim, arr))
		}
	}
	b.Log("\n" + mixTable(nodes, gangsTogether, rows))
}

// rowLimits are a row's client limits by name: Tessera's and
// kube-scheduler's queries per second and burst (0: the program's
// defaults).
func rowLimits(name string, tessera bool) [2]int {
	l := map[string][2][2]int{
		"stock":     {{0, 0}, {0, 0}},
		"equal":     {{200, 400}, {200, 400}},
		"unlimited": {{5000, 10000}, {5000, 10000}},
	}[name]
	if tessera {
		return l[0]
	}
	return l[1]
}

// startRowScheduler starts a benchmark row's scheduler at the row's
// client limits: `tessera scheduler` (bin with env, plus extra flags) or
// kube-scheduler.
func startRowScheduler(ctx context.Context, b *testing.B, cl *testcluster.Cluster, ns string, tessera bool, limits, bin string, env []string, extra ...string) *testcluster.Process {
	l := rowLimits(limits, tessera)
	if !tessera {
		return startKubeSchedulerProcess(ctx, b, cl, ns, l[0], l[1])
	}
	args := []string{"scheduler", "--kubeconfig=" + cl.Kubeconfig, "--leader-elect=false", "--metrics-addr="}
	if l[0] > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%d", l[0]), fmt.Sprintf("--kube-api-burst=%d", l[1]))
	}
	return startBenchProcess(b, cl, "tessera-"+ns, bin, env, append(args, extra...)...)
}

// baselineRow names the row of TESSERA_BENCH_BASELINE_BIN's scheduler.
const baselineRow = "tessera-baseline"

// writeMixTable writes the table to $TESSERA_BENCH_TABLE, if set.
func writeMixTable(b *testing.B, nodes int, gangsTogether bool, rows []mixRow) {
	if path := os.Getenv("TESSERA_BENCH_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(mixTable(nodes, gangsTogether, rows)), 0o644); err != nil {
			b.Fatalf("TESSERA_BENCH_TABLE: %v", err)
		}
	}
}

// mixTable renders the rows as a markdown table.
func mixTable(nodes int, gangsTogether bool, rows []mixRow) string {
	var sb strings.Builder
	arrival := "a gang's members created together (TESSERA_BENCH_GANG_ARRIVAL=together)"
	if !gangsTogether {
		arrival = "every pod created at its own slot, gang members too (TESSERA_BENCH_GANG_ARRIVAL=apart)"
	}
	fmt.Fprintf(&sb, "%d KWOK nodes of 8 GPUs; load average at the end %s; steady arrival: %s\n\n", nodes, loadAvg(), arrival)
	sb.WriteString("Latency: creation to bound; \"from ready\": a gang member's from its gang's last member's creation (0 when bound before); \"solo\": pods in no gang.\n\n")
	sb.WriteString("| limits | arrival | scheduler | pods | pods/s | ratio | p50 ms | p90 ms | p99 ms | from ready p50 / p90 / p99 ms | solo p50 / p99 ms | CPU s | peak RSS MiB |\n")
	sb.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|\n")
	for i, r := range rows {
		ratio := "1" // against kube-scheduler's row of the same limits and arrival
		for _, k := range rows[i+1:] {
			if r.scheduler != "kube-scheduler" && k.scheduler == "kube-scheduler" && k.limits == r.limits && k.arrival == r.arrival {
				ratio = fmt.Sprintf("%.2fx", r.rate/k.rate)
				break
			}
		}
		at := func(d []time.Duration, p int) string { return fmt.Sprintf("%.0f", float64(pct(d, p))/1e6) }
		ms := func(p int) string { return at(r.lat, p) }
		fmt.Fprintf(&sb, "| %s | %s | %s | %d | %.1f | %s | %s | %s | %s | %s / %s / %s | %s / %s | %.1f | %.0f |\n",
			r.limits, r.arrival, r.scheduler, r.pods, r.rate, ratio, ms(50), ms(90), ms(99),
			at(r.ready, 50), at(r.ready, 90), at(r.ready, 99), at(r.solo, 50), at(r.solo, 99), r.cpu, r.rssMiB)
	}
	return sb.String()
}

// pct is the p-th percentile (nearest rank) of sorted durations.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[max(i, 1)-1]
}

// bindWatch records when each pod of a namespace is first seen bound.
type bindWatch struct {
	cancel context.CancelFunc
	f      informers.SharedInformerFactory
	mu     sync.Mutex
	bound  map[string]time.Time
}

func startBindWatch(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) *bindWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &bindWatch{cancel: cancel, bound: map[string]time.Time{},
		f: informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))}
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.bound[p.Name]; !ok {
			w.bound[p.Name] = now
		}
	}
	inf := w.f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }}); err != nil {
		b.Fatal(err)
	}
	w.f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatalf("%s: watch pods: %v", ns, ctx.Err())
	}
	return w
}

// wait returns once want pods are bound; it fails when the scheduler exits
// or nothing is bound for five minutes (a liveness bound: a pod that never
// fits would otherwise hang the run).
func (w *bindWatch) wait(b *testing.B, want int, proc *testcluster.Process) {
	last, lastChange := 0, time.Now()
	for {
		w.mu.Lock()
		n := len(w.bound)
		w.mu.Unlock()
		if n >= want {
			return
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if gone, err := proc.Exited(); gone {
			b.Fatalf("scheduler exited (%v) with %d of %d pods bound; log tail:\n%s", err, n, want, proc.LogTail(20))
		}
		if time.Since(lastChange) > 5*time.Minute {
			b.Fatalf("%d of %d pods bound, none for 5 minutes; scheduler log tail:\n%s", n, want, proc.LogTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *bindWatch) stop() { w.cancel(); w.f.Shutdown() }

// result is the bind rate from the first bind to the last and the sorted
// creation-to-bound latencies.
func (w *bindWatch) result(created []time.Time, plan []mixPod) (float64, []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first, last time.Time
	lat := make([]time.Duration, 0, len(plan))
	for i := range plan {
		at := w.bound[fmt.Sprintf("p-%05d", i)]
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		lat = append(lat, at.Sub(created[i]))
	}
	slices.Sort(lat)
	return float64(len(plan)-1) / max(last.Sub(first).Seconds(), 1e-3), lat
}

// fromReady is each pod's time from when it could first be placed to
// bound (mixRow.ready), and the creation-to-bound times of the pods in no
// gang, both sorted.
func (w *bindWatch) fromReady(created []time.Time, plan []mixPod) (ready, solo []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	complete := map[string]time.Time{} // gang -> its last member's creation
	for i, m := range plan {
		if m.gang != "" && created[i].After(complete[m.gang]) {
			complete[m.gang] = created[i]
		}
	}
	for i, m := range plan {
		at := w.bound[fmt.Sprintf("p-%05d", i)]
		if m.gang == "" {
			ready = append(ready, at.Sub(created[i]))
			solo = append(solo, at.Sub(created[i]))
			continue
		}
		ready = append(ready, max(at.Sub(complete[m.gang]), 0))
	}
	slices.Sort(ready)
	slices.Sort(solo)
	return ready, solo
}

// slowest describes the k pods with the longest creation-to-bound times.
func (w *bindWatch) slowest(created []time.Time, plan []mixPod, k int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	idx := make([]int, len(plan))
	for i := range idx {
		idx[i] = i
	}
	lat := func(i int) time.Duration { return w.bound[fmt.Sprintf("p-%05d", i)].Sub(created[i]) }
	slices.SortFunc(idx, func(a, b int) int { return int(lat(b) - lat(a)) })
	var out []string
	for _, i := range idx[:min(k, len(idx))] {
		m := plan[i]
		out = append(out, fmt.Sprintf("p-%05d (%d GPU, fraction %q, gang %q/%d, %s) %v", i, m.gpus, m.fraction, m.gang, m.gangSize, m.queue, lat(i).Round(time.Millisecond)))
	}
	return strings.Join(out, "; ")
}

// paced calls f for each i of slots at rate slots per second (on up to 64
// calls in flight): call i at slots[i]/rate seconds from the start, slots
// in ascending order; it waits for them.
func paced(ctx context.Context, b *testing.B, slots []int, rate int, f func(int) error) {
	b.Helper()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	start := time.Now()
	for i := 0; i < len(slots) && ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(slots[i]) * time.Second / time.Duration(rate))))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				once.Do(func() { firstErr = err })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// oneByOne is the arrival slots of n pods created one at a time.
func oneByOne(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// arrivalSlots is when each pod of the plan is created, in slots of one
// pod at the steady rate: pod i at slot i, except that with together a
// gang's members are all created at its first member's slot, as the
// controller of a job with a gang (a training operator, JobSet, a Volcano
// Job) creates its pods in one pass; the mean rate is the same.
func arrivalSlots(plan []mixPod, together bool) []int {
	out := oneByOne(len(plan))
	if !together {
		return out
	}
	for i := 1; i < len(plan); i++ {
		if plan[i].gang != "" && plan[i].gang == plan[i-1].gang {
			out[i] = out[i-1]
		}
	}
	return out
}

// createBenchNodes creates KWOK nodes gpu-0000... of 8 GPUs, advertising
// nvidia.com/gpu: kubeGPUs for kube-scheduler.
func createBenchNodes(ctx context.Context, b *testing.B, c kubernetes.Interface, nodes int, kubeGPUs string) {
	parallel(b, nodes, func(i int) error {
		res := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse(kubeGPUs),
			workload.ResourceGPU: resource.MustParse("128"),
		}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%04d", i), Labels: map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "8",
				"kubernetes.io/hostname": fmt.Sprintf("gpu-%04d", i), zoneKey: benchZone(i)},
				Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
			Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
		}
		_, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
}

// createRunningPods creates n pods already bound (by node name, CPU only,
// round robin over the nodes) in namespace running, before any row: both
// schedulers' informers and caches hold them, so a row measures whether a
// scheduling cycle costs what changed or what runs.
func createRunningPods(ctx context.Context, b *testing.B, c kubernetes.Interface, nodes, n int) {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "running"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	parallel(b, n, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%06d", i), Namespace: "running"},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("gpu-%04d", i%nodes), Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Requests: req}}}}}
		_, err := c.CoreV1().Pods("running").Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// deletePods deletes p-00000... one call per pod: a collection delete of
// 10,000 pods outlasts the API server's request timeout.
func deletePods(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string, n int) {
	zero := int64(0)
	parallel(b, n, func(i int) error {
		err := c.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p-%05d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil {
			return fmt.Errorf("delete the %s pods: %w", ns, err)
		}
		return nil
	})
}

// benchBinary is the program run as `tessera`: $TESSERA_BENCH_BIN (e.g.
// bin/tessera from make build), else this test binary acting as the
// tessera command.
func benchBinary(b *testing.B) (string, []string) {
	if bin := os.Getenv("TESSERA_BENCH_BIN"); bin != "" {
		return bin, nil
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatalf("find the test binary: %v", err)
	}
	// TestMain (chaos_test.go, package scheduler_test) runs the tessera
	// command when this variable is set.
	return self, []string{"TESSERA_SCHEDULER_TEST_MAIN=1"}
}

// startBenchProcess starts a scheduler process next to the cluster.
func startBenchProcess(b *testing.B, cl *testcluster.Cluster, name, bin string, env []string, args ...string) *testcluster.Process {
	p, err := cl.StartProcess(name, bin, env, args...)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// startKubeSchedulerProcess starts the stock kube-scheduler (as
// Cluster.StartKubeScheduler does, but as a Process, whose pid gives its
// CPU and memory) with the given client limits (qps 0: its defaults) and
// no HTTPS endpoint.
func startKubeSchedulerProcess(ctx context.Context, b *testing.B, cl *testcluster.Cluster, name string, qps, burst int) *testcluster.Process {
	bin, err := toolbin.Binary(ctx, "kube-scheduler")
	if err != nil {
		b.Fatal(err)
	}
	limits := ""
	if qps > 0 {
		limits = fmt.Sprintf("  qps: %d\n  burst: %d\n", qps, burst)
	}
	cfg := filepath.Join(cl.Dir, "kube-scheduler-"+name+".yaml")
	body := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: %s\n%sleaderElection:\n  leaderElect: false\n", cl.Kubeconfig, limits)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		b.Fatalf("write kube-scheduler config: %v", err)
	}
	return startBenchProcess(b, cl, "kube-scheduler-"+name, bin, nil, "--config="+cfg, "--secure-port=0", "--v=0")
}

// procUsage reads a process's CPU seconds (utime+stime of /proc/PID/stat)
// and peak resident memory in MiB (VmHWM of /proc/PID/status).
func procUsage(b *testing.B, pid int) (cpu, rssMiB float64) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("scheduler CPU: %v", err)
	}
	// Fields after the command name (which may hold spaces), from field 3.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(rest) < 13 {
		b.Fatalf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(rest))
	}
	ut, err1 := strconv.ParseFloat(rest[11], 64) // field 14
	st, err2 := strconv.ParseFloat(rest[12], 64) // field 15
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: utime %q, stime %q", pid, rest[11], rest[12])
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("scheduler memory: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatalf("/proc/%d/status: VmHWM %q", pid, f[1])
			}
			rssMiB = kb / 1024
		}
	}
	return (ut + st) / clockTick, rssMiB
}

// fetchProfile saves http://addr/debug/pprof/<what> to path.
func fetchProfile(ctx context.Context, b *testing.B, addr, what, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+what, nil)
	if err != nil {
		b.Errorf("profile %s: %v", what, err)
		return
	}
	var resp *http.Response
	for try := 0; ; try++ { // the server may not listen yet
		if resp, err = http.DefaultClient.Do(req); err == nil || try == 100 || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Errorf("profile %s: %v", what, err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("profile %s: status %s, %v", what, resp.Status, err)
		return
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Errorf("profile %s: %v", what, err)
	}
}

// loopbackPort returns a free loopback TCP port.
func loopbackPort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("reserve a loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// loadAvg is the machine's load average (1, 5, 15 minutes).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// envList reads a comma-separated list of allowed names.
func envList(b *testing.B, name, def string, allowed ...string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	out := strings.Split(v, ",")
	for _, n := range out {
		if !slices.Contains(allowed, n) {
			b.Fatalf("%s: unknown value %q; allowed: %s", name, n, strings.Join(allowed, ", "))
		}
	}
	return out
}
