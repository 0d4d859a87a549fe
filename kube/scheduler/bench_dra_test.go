package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// The DRA scenario of BenchmarkBindThroughput (TESSERA_BENCH_SCENARIO=dra).

// draKind is the claim a pod of the DRA scenario asks for.
type draKind int

const (
	draWhole1 draKind = iota // one whole GPU (class gpu.tessera.io, no capacity)
	draWhole2                // two whole GPUs
	draHalf                  // a share: compute 0.5, memory 39Gi (shared-gpu.tessera.io)
	draBurst                 // a share with burst: compute 0.25 (up to 0.8), memory 19Gi (up to 39Gi)
	draShared                // the half share of a ResourceClaim several pods reference
)

// draTemplateKinds are the kinds whose pods take their claim from a
// ResourceClaimTemplate (draShared's pods name a ResourceClaim instead).
func draTemplateKinds() []draKind { return []draKind{draWhole1, draWhole2, draHalf, draBurst} }

// template names the ResourceClaimTemplate of kind k.
func (k draKind) template() string {
	switch k {
	case draWhole1:
		return "whole-1"
	case draWhole2:
		return "whole-2"
	case draHalf:
		return "half"
	case draBurst:
		return "burst"
	}
	return ""
}

// draSharedPods is how many pods reference one shared claim.
const draSharedPods = 4

// draPod is one pod of the DRA scenario.
type draPod struct {
	kind  draKind
	claim string // the shared ResourceClaim's name (draShared only)
}

// draPlan draws n pods (seeded, the same for every scheduler): 30% one
// whole GPU, 10% two whole GPUs, 30% a half share, 25% a quarter share
// with burst, and in 5% of the draws draSharedPods pods that reference
// one shared claim for a half share (so about 17% of the pods): every
// path kube-scheduler's DRA plugin takes for Tessera's devices (a count of
// whole devices on devices that allow several allocations, consumable
// capacity, opaque configuration copied into the allocation, an allocated
// claim that pins later pods to its node).
func draPlan(n int) []draPod {
	rng := rand.New(rand.NewPCG(3, 4))
	var out []draPod
	for unit := 0; len(out) < n; unit++ {
		switch r := rng.Float64(); {
		case r < 0.30:
			out = append(out, draPod{kind: draWhole1})
		case r < 0.40:
			out = append(out, draPod{kind: draWhole2})
		case r < 0.70:
			out = append(out, draPod{kind: draHalf})
		case r < 0.95:
			out = append(out, draPod{kind: draBurst})
		default:
			c := fmt.Sprintf("shared-%05d", unit)
			for i := 0; i < draSharedPods && len(out) < n; i++ {
				out = append(out, draPod{kind: draShared, claim: c})
			}
		}
	}
	return out
}

// draClaimSpec is the claim of kind k.
func draClaimSpec(k draKind) resourceapi.ResourceClaimSpec {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	var config []resourceapi.DeviceClaimConfiguration
	share := func(compute, memory string) {
		req.DeviceClassName = kdra.ClassSharedGPU
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			kdra.CapacityCompute: resource.MustParse(compute), kdra.CapacityMemory: resource.MustParse(memory)}}
	}
	switch k {
	case draWhole2:
		req.Count = 2
	case draHalf, draShared:
		// 39Gi: two halves fit an H100's 81559 MiB.
		share("0.5", "39Gi")
	case draBurst:
		share("0.25", "19Gi")
		raw := fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q,"computeLimit":"0.8","memoryLimit":"39Gi"}`, kdra.ConfigAPIVersion, kdra.ConfigKind)
		config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: kdra.DriverName, Parameters: runtime.RawExtension{Raw: raw}}}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}, Config: config}}
}

// object is the pod as one scheduler gets it: the same claim for every
// scheduler, schedulerName set for Tessera's.
func (d draPod) object(name, ns string, tessera bool) *corev1.Pod {
	ref := corev1.PodResourceClaim{Name: "gpu"}
	if d.kind == draShared {
		ref.ResourceClaimName = &d.claim
	} else {
		t := d.kind.template()
		ref.ResourceClaimTemplateName = &t
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{ref},
			Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
	if tessera {
		p.Spec.SchedulerName = DefaultName
	}
	return p
}

// benchDRA is BenchmarkBindThroughput's DRA scenario: the mix scenario's
// harness (KWOK nodes of 8 GPUs, TESSERA_BENCH_NODES default 5000; client
// limits TESSERA_BENCH_LIMITS; arrivals TESSERA_BENCH_ARRIVAL with
// TESSERA_BENCH_PODS (default 10000), TESSERA_BENCH_STEADY_PODS (2000) and
// TESSERA_BENCH_RATE (default 10 pods/s here, see below); its own table,
// with p99 latency by kind of claim, in TESSERA_BENCH_TABLE) with every
// GPU a DRA device and every pod a ResourceClaim:
//
//   - each node's ResourceSlice is what Tessera's node agent publishes for
//     8 H100s (the simulated source's inventory, sharing shared, through
//     kdra.Resources), written by the harness since KWOK nodes run no
//     agent, and Tessera's DeviceClasses as the chart installs them;
//   - pods follow draPlan; their claims come from ResourceClaimTemplates
//     (kube-controller-manager's resourceclaim-controller, started here
//     with client limits of 1000/2000 so that it is not what the run
//     measures, creates them) or name a shared ResourceClaim;
//   - in a burst run the scheduler starts once every pod's claim exists;
//   - after each row every pod's claim must be allocated on the pod's node
//     (read the way Tessera's kubelet plugin reads it: kdra.Shares),
//     consume what its request asks, be reserved for the pod, and no GPU
//     may hold more than its compute or memory; a scheduler that places
//     wrongly fails the benchmark.
//
// The rows are draSchedulerRows' schedulers, each in a namespace of its
// own; once its pods are deleted, its claims are deleted too (the harness
// stands in for the garbage collector, which does not run here) and gone
// before the next row starts, so that every row starts on free GPUs.
func benchDRA(b *testing.B) {
	// dra scheduler rows: the schedulers measured, in this order, on the
	// same pods and claims: Tessera's (as `tessera scheduler`, the mix
	// scenario's way, with schedulerName set), then kube-scheduler, the
	// last, which the table's ratio column compares against.
	draSchedulerRows := []string{"tessera", "kube-scheduler"}

	nodes, pods := envInt(b, "TESSERA_BENCH_NODES", 5000), envInt(b, "TESSERA_BENCH_PODS", 10000)
	// 10 pods/s: kube-scheduler's stock 50 QPS sustains about 16 DRA pods
	// per second (three writes each: the claim's finalizer, its status,
	// the binding), so at 10 the latency is the scheduler's, not a queue.
	steadyPods, rate := envInt(b, "TESSERA_BENCH_STEADY_PODS", 2000), envInt(b, "TESSERA_BENCH_RATE", 10)
	limitNames := envList(b, "TESSERA_BENCH_LIMITS", "stock,equal,unlimited", "stock", "equal", "unlimited")
	arrivals := envList(b, "TESSERA_BENCH_ARRIVAL", "burst,steady", "burst", "steady")
	bin, env := benchBinary(b)

	ctx, cl, cfg := testcluster.ForTest(b, true)
	cfg.QPS, cfg.Burst = 2000, 4000 // the harness's own client: fast set-up
	setup := kubernetes.NewForConfigOrDie(cfg)
	startClaimController(ctx, b, cl)
	for _, dc := range kdra.DeviceClasses(workload.ResourceGPU) {
		if _, err := setup.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			b.Fatalf("create DeviceClass %s: %v", dc.Name, err)
		}
	}
	createBenchNodes(ctx, b, setup, nodes, "8")
	inv := draInventory(b)
	parallel(b, nodes, func(i int) error { return createSlices(ctx, setup, inv, benchNodeName(i)) })
	b.Logf("%d nodes of 8 GPUs with their ResourceSlices ready; load average %s", nodes, loadAvg())

	var rows []draRow
	for _, lim := range limitNames {
		for _, arr := range arrivals {
			n := pods
			if arr == "steady" {
				n = steadyPods
			}
			plan := draPlan(n)
			for _, sc := range draSchedulerRows {
				ns := fmt.Sprintf("dra-%s-%s-%s", lim, arr, sc)
				tessera := sc != "kube-scheduler"
				createDRANamespace(ctx, b, setup, ns, plan)
				claims := startClaimWatch(ctx, b, setup, ns)
				watch := startBindWatch(ctx, b, setup, ns)
				created := make([]time.Time, len(plan))
				create := func(i int) error {
					created[i] = time.Now()
					_, err := setup.CoreV1().Pods(ns).Create(ctx, plan[i].object(fmt.Sprintf("p-%05d", i), ns, tessera), metav1.CreateOptions{})
					return err
				}
				if arr == "burst" {
					parallel(b, len(plan), create)
					// Every claim exists (the shared ones already did)
					// before the scheduler starts: the run measures it, not
					// the claim controller.
					claims.waitCount(b, draClaimCount(plan))
				}
				proc := startRowScheduler(ctx, b, cl, ns, tessera, lim, bin, env)
				want := len(plan)
				if arr == "steady" {
					// As in the mix scenario: the stream starts once the
					// scheduler has bound a first pod.
					warm := draPod{kind: draWhole1}.object("warm-up", ns, tessera)
					if _, err := setup.CoreV1().Pods(ns).Create(ctx, warm, metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					watch.wait(b, 1, proc)
					want++
					paced(ctx, b, oneByOne(len(plan)), rate, create)
				}
				watch.wait(b, want, proc)
				cpu, rss := procUsage(b, proc.Pid())
				proc.Stop(10 * time.Second)
				watch.stop()
				row := draRow{limits: lim, arrival: arr, scheduler: sc, pods: len(plan), cpu: cpu, rssMiB: rss}
				row.rate, row.lat, row.byKind = draResult(watch, created, plan)
				rows = append(rows, row)
				writeDRATable(b, nodes, rows) // after each row: a failed run keeps what it measured
				b.Logf("%s: %.1f pods/s, p99 %v, CPU %.1f s, peak RSS %.0f MiB (load average %s)", ns, row.rate, pct(row.lat, 99), cpu, rss, loadAvg())
				if err := checkDRAAllocations(ctx, setup, ns, plan, inv); err != nil {
					b.Fatalf("%s: %v", ns, err)
				}
				deletePods(ctx, b, setup, ns, len(plan))
				if arr == "steady" {
					zero := int64(0)
					if err := setup.CoreV1().Pods(ns).Delete(ctx, "warm-up", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
						b.Fatal(err)
					}
				}
				deleteClaims(ctx, b, setup, claims)
				claims.waitCount(b, 0) // the next row starts on free GPUs
				claims.stop()
			}
			k := rows[len(rows)-1] // kube-scheduler's, the last of the row pair
			b.ReportMetric(k.rate, fmt.Sprintf("dra-%s-%s-kube-scheduler-pods/s", lim, arr))
			for _, r := range rows[len(rows)-len(draSchedulerRows) : len(rows)-1] {
				b.ReportMetric(r.rate, fmt.Sprintf("dra-%s-%s-%s-pods/s", lim, arr, r.scheduler))
				b.ReportMetric(r.rate/k.rate, fmt.Sprintf("dra-%s-%s-%s-ratio", lim, arr, r.scheduler))
			}
		}
	}
	b.Log("\n" + draTable(nodes, rows))
}

// benchNodeName is the name createBenchNodes gives node i.
func benchNodeName(i int) string { return fmt.Sprintf("gpu-%04d", i) }

// draInventory is the inventory Tessera's node agent reports for a node
// of 8 H100s on the simulated source (--source sim:8xH100) with its
// default --sharing shared, which its SlicePublisher turns into the
// node's ResourceSlices. Name is left to fill per node.
func draInventory(b testing.TB) inventory.Node {
	src, err := simulated.FromSpec("8xH100", catalog.Default())
	if err != nil {
		b.Fatalf("simulated inventory: %v", err)
	}
	nodes, err := src.Discover(b.Context())
	if err != nil || len(nodes) != 1 {
		b.Fatalf("simulated inventory: %d nodes, %v", len(nodes), err)
	}
	n := nodes[0]
	for i := range n.GPUs {
		n.GPUs[i].Sharing = inventory.SharingShared
	}
	return n
}

// gpuOf is n's GPU uuid (kdra.Shares only returns n's GPUs).
func gpuOf(n inventory.Node, uuid string) inventory.GPU {
	i := slices.IndexFunc(n.GPUs, func(g inventory.GPU) bool { return g.UUID == uuid })
	if i < 0 {
		return inventory.GPU{UUID: uuid}
	}
	return n.GPUs[i]
}

// nodeInventory is inv named after node.
func nodeInventory(inv inventory.Node, node string) inventory.Node {
	inv.Name = node
	inv.GPUs = slices.Clone(inv.GPUs)
	return inv
}

// createSlices writes node's ResourceSlices as the agent's resourceslice
// controller would: one pool named after the node, generation 1.
func createSlices(ctx context.Context, c kubernetes.Interface, inv inventory.Node, node string) error {
	n := nodeInventory(inv, node)
	pool := kdra.Resources(&n).Pools[node]
	for i, s := range pool.Slices {
		rs := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, kdra.DriverName, i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: kdra.DriverName, NodeName: &n.Name, Devices: s.Devices,
				Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}}}
		if _, err := c.ResourceV1().ResourceSlices().Create(ctx, rs, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return fmt.Errorf("create ResourceSlice %s: %w", rs.Name, err)
		}
	}
	return nil
}

// startClaimController runs kube-controller-manager with the
// resourceclaim-controller alone (claims made from templates, removed
// with their pods), with client limits high enough that claim creation
// keeps up with any row.
func startClaimController(ctx context.Context, b *testing.B, cl *testcluster.Cluster) {
	bin, err := toolbin.Binary(ctx, "kube-controller-manager")
	if err != nil {
		b.Fatal(err)
	}
	startBenchProcess(b, cl, "kube-controller-manager-dra", bin, nil, "--kubeconfig="+cl.Kubeconfig,
		"--controllers=resourceclaim-controller", "--leader-elect=false", "--secure-port=0",
		"--kube-api-qps=1000", "--kube-api-burst=2000", "--v=0")
}

// createDRANamespace creates ns with the plan's claim templates and
// shared claims.
func createDRANamespace(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string, plan []draPod) {
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, k := range draTemplateKinds() {
		name := k.template()
		t := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: draClaimSpec(k)}}
		if _, err := c.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, t, strict); err != nil {
			b.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
		}
	}
	for _, name := range draSharedClaims(plan) {
		rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: draClaimSpec(draShared)}
		if _, err := c.ResourceV1().ResourceClaims(ns).Create(ctx, rc, strict); err != nil {
			b.Fatalf("create ResourceClaim %s/%s: %v", ns, name, err)
		}
	}
}

// draSharedClaims lists the plan's shared claims.
func draSharedClaims(plan []draPod) []string {
	var out []string
	for _, p := range plan {
		if p.kind == draShared && !slices.Contains(out, p.claim) {
			out = append(out, p.claim)
		}
	}
	return out
}

// draClaimCount is how many claims the plan's pods use: one per pod from
// a template, plus the shared ones.
func draClaimCount(plan []draPod) int {
	n := len(draSharedClaims(plan))
	for _, p := range plan {
		if p.kind != draShared {
			n++
		}
	}
	return n
}

// deleteClaims deletes every claim of ns once its pods are gone: the
// shared ones, and those made from templates, which the garbage collector
// (not run here) would delete with their pods. The resourceclaim-controller
// has released or releases them (reservedFor, allocation, finalizer).
func deleteClaims(ctx context.Context, b *testing.B, c kubernetes.Interface, w *claimWatch) {
	names := w.inf.GetStore().ListKeys() // namespace/name
	parallel(b, len(names), func(i int) error {
		_, name, _ := strings.Cut(names[i], "/")
		err := c.ResourceV1().ResourceClaims(w.ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceClaim %s/%s: %w", w.ns, name, err)
		}
		return nil
	})
}

// claimWatch keeps the ResourceClaims of a namespace.
type claimWatch struct {
	ns     string
	cancel context.CancelFunc
	f      informers.SharedInformerFactory
	inf    cache.SharedIndexInformer
}

func startClaimWatch(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) *claimWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &claimWatch{ns: ns, cancel: cancel, f: informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))}
	w.inf = w.f.Resource().V1().ResourceClaims().Informer()
	w.f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		b.Fatalf("%s: watch claims: %v", ns, ctx.Err())
	}
	return w
}

// waitCount returns once the namespace holds want claims; it fails when
// the count does not move for five minutes (a liveness bound).
func (w *claimWatch) waitCount(b *testing.B, want int) {
	last, lastChange := -1, time.Now()
	for {
		n := len(w.inf.GetStore().ListKeys())
		if n == want {
			return
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) > 5*time.Minute {
			b.Fatalf("%s: %d ResourceClaims, want %d; none made or removed for 5 minutes", w.ns, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *claimWatch) stop() { w.cancel(); w.f.Shutdown() }

// draRow is one line of the DRA table.
type draRow struct {
	limits, arrival, scheduler string
	pods                       int
	rate                       float64         // pods bound per second
	lat                        []time.Duration // creation to bound, sorted
	// byKind is lat by draLatencyGroup.
	byKind      [3][]time.Duration
	cpu, rssMiB float64 // scheduler CPU seconds (start to last bind), peak RSS
}

// draLatencyGroup is the table's latency group of a pod: whole GPUs,
// shares with or without burst, pods of a shared claim.
func draLatencyGroup(k draKind) int {
	switch k {
	case draWhole1, draWhole2:
		return 0
	case draHalf, draBurst:
		return 1
	}
	return 2
}

// draResult is the bind rate from the first bind to the last and the
// sorted creation-to-bound latencies of pods p-00000..., all and by
// latency group (bindWatch.result, without the mix's plan).
func draResult(w *bindWatch, created []time.Time, plan []draPod) (float64, []time.Duration, [3][]time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first, last time.Time
	var byKind [3][]time.Duration
	lat := make([]time.Duration, 0, len(created))
	for i := range created {
		at := w.bound[fmt.Sprintf("p-%05d", i)]
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		lat = append(lat, at.Sub(created[i]))
		g := draLatencyGroup(plan[i].kind)
		byKind[g] = append(byKind[g], at.Sub(created[i]))
	}
	slices.Sort(lat)
	for _, l := range byKind {
		slices.Sort(l)
	}
	return float64(len(created)-1) / max(last.Sub(first).Seconds(), 1e-3), lat, byKind
}

// writeDRATable writes the table to $TESSERA_BENCH_TABLE, if set.
func writeDRATable(b *testing.B, nodes int, rows []draRow) {
	if path := os.Getenv("TESSERA_BENCH_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(draTable(nodes, rows)), 0o644); err != nil {
			b.Fatalf("TESSERA_BENCH_TABLE: %v", err)
		}
	}
}

// draTable renders the rows as a markdown table.
func draTable(nodes int, rows []draRow) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d KWOK nodes of 8 H100s published as DRA devices of %s; load average at the end %s\n\n", nodes, kdra.DriverName, loadAvg())
	sb.WriteString("Latency: creation to bound; p99 by claim: whole GPUs / shares (with or without burst) / pods of a shared claim.\n\n")
	sb.WriteString("| limits | arrival | scheduler | pods | pods/s | ratio | p50 ms | p90 ms | p99 ms | p99 ms whole / share / shared | CPU s | peak RSS MiB |\n")
	sb.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	ms := func(d []time.Duration, p int) string { return fmt.Sprintf("%.0f", float64(pct(d, p))/1e6) }
	for i, r := range rows {
		ratio := "1" // against kube-scheduler's row of the same limits and arrival
		for _, k := range rows[i+1:] {
			if r.scheduler != "kube-scheduler" && k.scheduler == "kube-scheduler" && k.limits == r.limits && k.arrival == r.arrival {
				ratio = fmt.Sprintf("%.2fx", r.rate/k.rate)
				break
			}
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %d | %.1f | %s | %s | %s | %s | %s / %s / %s | %.1f | %.0f |\n",
			r.limits, r.arrival, r.scheduler, r.pods, r.rate, ratio, ms(r.lat, 50), ms(r.lat, 90), ms(r.lat, 99),
			ms(r.byKind[0], 99), ms(r.byKind[1], 99), ms(r.byKind[2], 99), r.cpu, r.rssMiB)
	}
	return sb.String()
}

// checkDRAAllocations checks what the scheduler of namespace ns left in
// the API: each pod of the plan is bound, its claim (from its template or
// the shared one) is allocated on the pod's node, reserved for the pod,
// and reads (kdra.Shares, as Tessera's kubelet plugin reads it) as what
// its request asks (kdra.Requests: the number of GPUs, each share's
// guarantee and burst, on distinct GPUs); and, over every allocated claim
// of the cluster, no GPU is given more than its compute (1) or memory.
func checkDRAAllocations(ctx context.Context, c kubernetes.Interface, ns string, plan []draPod, inv inventory.Node) error {
	podList, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	claimList, err := c.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	podsByName := map[string]*corev1.Pod{}
	for i := range podList.Items {
		podsByName[podList.Items[i].Name] = &podList.Items[i]
	}
	claims := map[string]*resourceapi.ResourceClaim{} // namespace/name
	for i := range claimList.Items {
		rc := &claimList.Items[i]
		claims[rc.Namespace+"/"+rc.Name] = rc
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	cat := catalog.Default()
	for i, d := range plan {
		name := fmt.Sprintf("p-%05d", i)
		p := podsByName[name]
		if p == nil || p.Spec.NodeName == "" {
			fail("pod %s is not bound", name)
			continue
		}
		claimName := d.claim
		if d.kind != draShared {
			claimName = ""
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == "gpu" && st.ResourceClaimName != nil {
					claimName = *st.ResourceClaimName
				}
			}
		}
		rc := claims[ns+"/"+claimName]
		if rc == nil {
			fail("pod %s: its claim %q does not exist", name, claimName)
			continue
		}
		if !slices.ContainsFunc(rc.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
			return r.Resource == "pods" && r.Name == name && r.UID == p.UID
		}) {
			fail("pod %s: claim %s is not reserved for it (reservedFor %v)", name, claimName, rc.Status.ReservedFor)
		}
		n := nodeInventory(inv, p.Spec.NodeName)
		shares, err := kdra.Shares(rc, &n, nil) // fails for a claim not allocated, or allocated on another node
		if err != nil {
			fail("pod %s on %s: %v", name, p.Spec.NodeName, err)
			continue
		}
		reqs, _, err := kdra.Requests(rc, cat)
		if err != nil || len(reqs) != 1 {
			fail("pod %s: claim %s reads as %d requests, %v", name, claimName, len(reqs), err)
			continue
		}
		g := reqs[0].GPU
		if len(shares) != g.Count {
			fail("pod %s: claim %s has %d GPUs, it asks for %d", name, claimName, len(shares), g.Count)
		}
		var uuids []string
		for _, s := range shares {
			gpu := gpuOf(n, s.UUID)
			compute, computeLimit := g.ResolveCompute(gpu.MemoryMiB)
			memory, memoryLimit := g.ResolveMemory(gpu.MemoryMiB)
			if s.ComputeMilli != compute || s.ComputeLimitMilli != computeLimit || s.MemoryMiB != memory || s.MemoryLimitMiB != memoryLimit {
				fail("pod %s: claim %s gives %s compute %dm (limit %dm), memory %d MiB (limit %d); it asks %dm (%dm), %d MiB (%d)",
					name, claimName, s.UUID, s.ComputeMilli, s.ComputeLimitMilli, s.MemoryMiB, s.MemoryLimitMiB, compute, computeLimit, memory, memoryLimit)
			}
			if slices.Contains(uuids, s.UUID) {
				fail("pod %s: claim %s names GPU %s twice", name, claimName, s.UUID)
			}
			uuids = append(uuids, s.UUID)
		}
	}
	// Over every allocated claim of the cluster, each counted once
	// however many pods share it.
	type gpuUse struct{ computeMilli, memoryMiB, gpuMemoryMiB, claims int64 }
	use := map[string]*gpuUse{} // node/uuid
	for _, rc := range claims {
		if rc.Status.Allocation == nil {
			continue
		}
		node := ""
		for _, r := range rc.Status.Allocation.Devices.Results {
			if r.Driver == kdra.DriverName {
				node = r.Pool // Tessera's pools are named after their node
			}
		}
		n := nodeInventory(inv, node)
		shares, err := kdra.Shares(rc, &n, nil)
		if err != nil {
			fail("claim %s/%s: %v", rc.Namespace, rc.Name, err)
			continue
		}
		for _, s := range shares {
			u := use[node+"/"+s.UUID]
			if u == nil {
				u = &gpuUse{gpuMemoryMiB: gpuOf(n, s.UUID).MemoryMiB}
				use[node+"/"+s.UUID] = u
			}
			u.computeMilli += s.ComputeMilli
			u.memoryMiB += s.MemoryMiB
			u.claims++
		}
	}
	keys := make([]string, 0, len(use))
	for k := range use {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		u := use[k]
		if u.computeMilli > 1000 || u.memoryMiB > u.gpuMemoryMiB {
			fail("GPU %s over-committed: %d claims take compute %dm of 1000m, memory %d of %d MiB", k, u.claims, u.computeMilli, u.memoryMiB, u.gpuMemoryMiB)
		}
	}
	if len(problems) > 0 {
		more := ""
		if len(problems) > 10 {
			more = fmt.Sprintf("\n(and %d more)", len(problems)-10)
			problems = problems[:10]
		}
		return fmt.Errorf("%d pods' claims checked, wrong allocations:\n%s%s", len(plan), strings.Join(problems, "\n"), more)
	}
	return nil
}

// TestCheckDRAAllocations: the check after each row of the DRA scenario
// accepts what a correct scheduler leaves in the API (two shares and a
// shared claim's share on GPUs of one node, two whole GPUs, each claim
// reserved for its pods) and names each way a wrong one fails it.
func TestCheckDRAAllocations(t *testing.T) {
	const ns, node = "dra", "gpu-0000"
	inv := draInventory(t)
	plan := []draPod{{kind: draHalf}, {kind: draBurst}, {kind: draWhole2}, {kind: draShared, claim: "shared-00003"}, {kind: draShared, claim: "shared-00003"}}
	// result allocates device dev of pool with the given consumption.
	result := func(pool, dev, compute, memory string) resourceapi.DeviceRequestAllocationResult {
		return resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: kdra.DriverName, Pool: pool, Device: dev,
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse(compute), kdra.CapacityMemory: resource.MustParse(memory)}}
	}
	// world is what a correct scheduler leaves: pods on node, half and
	// burst on gpu-0, two whole GPUs gpu-1 and gpu-2, the shared half on
	// gpu-3.
	world := func() ([]*corev1.Pod, []*resourceapi.ResourceClaim) {
		var pods []*corev1.Pod
		var claims []*resourceapi.ResourceClaim
		for i, d := range plan {
			p := d.object(fmt.Sprintf("p-%05d", i), ns, false)
			p.UID = types.UID(fmt.Sprintf("uid-%d", i))
			p.Spec.NodeName = node
			name := d.claim
			if d.kind != draShared {
				name = fmt.Sprintf("p-%05d-gpu", i)
				p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
			}
			pods = append(pods, p)
			ref := resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID}
			if k := slices.IndexFunc(claims, func(c *resourceapi.ResourceClaim) bool { return c.Name == name }); k >= 0 {
				claims[k].Status.ReservedFor = append(claims[k].Status.ReservedFor, ref)
				continue
			}
			rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: draClaimSpec(d.kind)}
			alloc := &resourceapi.AllocationResult{}
			switch d.kind {
			case draHalf:
				alloc.Devices.Results = append(alloc.Devices.Results, result(node, "gpu-0", "0.5", "39Gi"))
			case draBurst:
				alloc.Devices.Results = append(alloc.Devices.Results, result(node, "gpu-0", "0.25", "19Gi"))
				c := rc.Spec.Devices.Config[0]
				alloc.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, Requests: c.Requests, DeviceConfiguration: c.DeviceConfiguration}}
			case draWhole2:
				alloc.Devices.Results = append(alloc.Devices.Results, result(node, "gpu-1", "1", "0"), result(node, "gpu-2", "1", "0"))
			case draShared:
				alloc.Devices.Results = append(alloc.Devices.Results, result(node, "gpu-3", "0.5", "39Gi"))
			}
			rc.Status = resourceapi.ResourceClaimStatus{Allocation: alloc, ReservedFor: []resourceapi.ResourceClaimConsumerReference{ref}}
			claims = append(claims, rc)
		}
		return pods, claims
	}
	claimOf := func(claims []*resourceapi.ResourceClaim, name string) *resourceapi.ResourceClaim {
		return claims[slices.IndexFunc(claims, func(c *resourceapi.ResourceClaim) bool { return c.Name == name })]
	}
	for _, tc := range []struct {
		name   string
		mutate func([]*corev1.Pod, []*resourceapi.ResourceClaim)
		want   string // "" for no error
	}{
		{"correct", func([]*corev1.Pod, []*resourceapi.ResourceClaim) {}, ""},
		{"pod not bound", func(p []*corev1.Pod, _ []*resourceapi.ResourceClaim) { p[0].Spec.NodeName = "" },
			"pod p-00000 is not bound"},
		{"claim not allocated", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) { c[0].Status.Allocation = nil },
			"pod p-00000 on gpu-0000: claim dra/p-00000-gpu: not allocated"},
		{"shared claim not reserved for its second pod", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			rc := claimOf(c, "shared-00003")
			rc.Status.ReservedFor = rc.Status.ReservedFor[:1]
		}, "pod p-00004: claim shared-00003 is not reserved for it"},
		{"pod on another node than its claim", func(p []*corev1.Pod, _ []*resourceapi.ResourceClaim) { p[2].Spec.NodeName = "gpu-0001" },
			"device gpu-1 of pool gpu-0000, not of this node gpu-0001"},
		{"less compute than asked", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			c[0].Status.Allocation.Devices.Results[0] = result(node, "gpu-0", "0.25", "39Gi")
		}, "gives " + inv.GPUs[0].UUID + " compute 250m (limit 250m), memory 39936 MiB (limit 39936); it asks 500m (500m), 39936 MiB (39936)"},
		{"burst dropped", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) { c[1].Status.Allocation.Devices.Config = nil },
			"compute 250m (limit 250m), memory 19456 MiB (limit 19456); it asks 250m (800m), 19456 MiB (39936)"},
		{"one GPU of two", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			c[2].Status.Allocation.Devices.Results = c[2].Status.Allocation.Devices.Results[:1]
		}, "claim p-00002-gpu has 1 GPUs, it asks for 2"},
		{"the same GPU twice", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			c[2].Status.Allocation.Devices.Results[1] = result(node, "gpu-1", "1", "0")
		}, "claim p-00002-gpu names GPU " + inv.GPUs[1].UUID + " twice"},
		{"whole GPU on a shared one", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			c[2].Status.Allocation.Devices.Results[0] = result(node, "gpu-0", "1", "0")
		}, "GPU gpu-0000/" + inv.GPUs[0].UUID + " over-committed: 3 claims take compute 1750m of 1000m"},
		{"memory past the GPU's", func(_ []*corev1.Pod, c []*resourceapi.ResourceClaim) {
			c[3].Status.Allocation.Devices.Results[0] = result(node, "gpu-0", "0.25", "39Gi") // the shared half, moved and shrunk
		}, "over-committed: 3 claims take compute 1000m of 1000m, memory 99328 of 81559 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, claims := world()
			tc.mutate(pods, claims)
			var objs []runtime.Object
			for _, p := range pods {
				objs = append(objs, p)
			}
			for _, c := range claims {
				objs = append(objs, c)
			}
			err := checkDRAAllocations(t.Context(), fake.NewClientset(objs...), ns, plan, inv)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a correct allocation fails the check: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("the check passes; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
