package clusterview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	agentkube "github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/scheduler"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/webui"
	"github.com/tessera-gpu/tessera/webui/browsertest"
)

// TestBrowserClusterView: the cluster view in a real headless Chromium,
// served from the scheduler of a real control plane with KWOK nodes: two
// nodes with GPUNode objects (one GPU unhealthy), one described by labels only, three queues, fractional and
// whole-GPU pods running and one pod that fits nowhere. The page's totals,
// each pod's share on its GPU, each node's pods, the queues' use and fair
// share and the waiting pod's reason equal what the API holds (the pods'
// assignment annotations and PodScheduled condition, the GPUNode status)
// and what the scheduler decided from (its View). The page writes no error
// to the console. Screenshots go to the test's artifact folder (and to
// TESSERA_SCREENSHOTS_DIR, for docs/images). Without chromium it skips,
// unless TESSERA_REQUIRE_BROWSER is set.
func TestBrowserClusterView(t *testing.T) {
	// The server closes after the browser (cleanups run last first): the
	// page's event stream would hold its Close.
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	t.Cleanup(srv.Close)
	b := browsertest.New(t)
	ctx, _, cfg := testcluster.ForTest(t, true)
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	if err := queues.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	if err := nodeuse.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	// Nodes: 4x H200 (GPU 3 unhealthy), 4x A100-80GB (simulated), and 2x L4 from node
	// labels (no agent).
	h200 := gpuNode(ctx, t, client, dyn, "gpu-h200-0", "H200", 4, func(in *inventory.Node) {
		in.GPUs[3].Health, in.GPUs[3].HealthReason = inventory.Unhealthy, "XID 79: GPU has fallen off the bus (simulated)"
	})
	a100 := gpuNode(ctx, t, client, dyn, "gpu-a100-0", "A100-80GB", 4, func(in *inventory.Node) { in.Source = "sim" }) // its agent runs on simulated GPUs
	labelNode(ctx, t, client, "gpu-l4-0", "L4", 2)
	createQueue(ctx, t, dyn, "research", map[string]any{"weight": int64(2), "guaranteed": map[string]any{"gpu": "2"}})
	createQueue(ctx, t, dyn, "prod", map[string]any{"priority": int64(10), "guaranteed": map[string]any{"gpu": "4"}, "limit": map[string]any{"gpu": "6"}})

	s, err := scheduler.New(scheduler.Config{Client: client, Dynamic: dyn, Resync: 200 * time.Millisecond,
		PodInitialBackoff: 100 * time.Millisecond, PodMaxBackoff: 400 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(testcluster.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	ui := webui.New(clusterview.Source{Viewer: s}, webui.Options{Title: "Tessera cluster", Scope: "cluster", SampleInterval: 250 * time.Millisecond, Refresh: time.Second,
		Log: slog.New(slog.NewTextHandler(testcluster.LogWriter{T: t}, nil))})
	go ui.Run(sctx)
	ui.Register(mux)
	srv.Start()

	frac := func(compute, limit, mem string) map[string]string {
		a := map[string]string{workload.AnnotationCompute: compute}
		if limit != "" {
			a[workload.AnnotationComputeLimit] = limit
		}
		if mem != "" {
			a[workload.AnnotationMemory] = mem
		}
		return a
	}
	model := func(m string, a map[string]string) map[string]string { a[workload.AnnotationModel] = m; return a }
	for i := range 3 {
		createPod(ctx, t, client, fmt.Sprintf("train-%d", i), "research", "1", model("H200", frac("0.5", "0.8", "40Gi")), "")
	}
	// The A100 node's pods declare their loads (simulated.LoadEnv) for the
	// simulated agent; infer-2 declares none: it runs nothing.
	for i, load := range []string{"busy=0.9,memory=60Gi", "busy=0.6,memory=30Gi"} {
		createPod(ctx, t, client, fmt.Sprintf("serve-%d", i), "prod", "1", model("A100-80GB", map[string]string{}), load)
	}
	for i, load := range []string{"busy=0.3,memory=6Gi", "busy=0.2,memory=4Gi", ""} {
		createPod(ctx, t, client, fmt.Sprintf("infer-%d", i), "prod", "1", model("A100-80GB", frac("0.25", "0.5", "10Gi")), load)
	}
	createPod(ctx, t, client, "notebook", "", "1", model("L4", frac("0.5", "", "")), "")
	testcluster.Eventually(t, "9 pods bound", 90*time.Second, func() error { return countBound(ctx, client, 9) })
	createPod(ctx, t, client, "too-big", "research", "8", nil, "")
	var reason string
	testcluster.Eventually(t, "too-big's condition", 90*time.Second, func() error {
		p, err := client.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				reason = c.Message
				return nil
			}
		}
		return fmt.Errorf("no PodScheduled=False condition: %+v", p.Status.Conditions)
	})
	// The scheduler's view has caught up with the API (the pending pod's
	// condition is read from its informer).
	testcluster.Eventually(t, "the view shows too-big's reason", 90*time.Second, func() error {
		v, ok := s.View()
		if !ok || len(v.Pending) != 1 || v.Pending[0].Message != reason {
			return fmt.Errorf("view pending %+v", v.Pending)
		}
		return nil
	})

	// What the API holds: every bound pod's shares, by GPU and by queue.
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type shareOf struct {
		pod  string
		node string
		sh   binding.Share
	}
	var shares []shareOf
	var guaranteed int64
	usedBy, podsOn := map[string]int64{}, map[string]int{}
	running := 0
	queueOf := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		running++
		podsOn[p.Spec.NodeName]++
		a, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		q := p.Labels[queues.LabelQueue]
		if q == "" {
			q = "default"
		}
		queueOf["default/"+p.Name] = q
		for _, c := range a.Containers {
			for _, sh := range c.GPUs {
				shares = append(shares, shareOf{pod: "default/" + p.Name, node: p.Spec.NodeName, sh: sh})
				guaranteed += sh.ComputeMilli
				usedBy[q] += sh.ComputeMilli
			}
		}
	}
	gpus := len(h200.GPUs) + len(a100.GPUs) + 2
	view, _ := s.View()
	shareOfQueue := map[string]float64{}
	for _, q := range view.Queues {
		shareOfQueue[q.Name] = q.Share
	}

	// The nodes' use (GPUUse). The A100 node's comes from the agent's own
	// code on simulated GPUs (simAgent: the node arbiter metering each
	// pod's declared load, the use records, the pacing loop, the metrics
	// collector) on a clock the test steps from t0, the pods' start;
	// infer-2 declares no load: below the idle threshold from the first
	// reading (t0+1s), it is an idle holder from the window that completes
	// the idle time (t0+61s), not before. The H200 node's is what an agent
	// metering with NVML publishes (NVML's figures are checked on hardware,
	// docs/gpu-validation.md): a figure of each share's own, measured. The
	// L4 node has no agent.
	const idler = "default/infer-2"
	t0 := time.Now().Truncate(time.Second)
	agent := startSimAgent(ctx, t, client, dyn, a100, pods.Items, t0)
	published := map[string]nodeuse.Status{}
	{
		at := time.Now()
		st := nodeuse.Status{Source: h200.Source, At: at, Rule: nodeuse.Rule{WindowSeconds: 10, IdleBelowMilli: 50, IdleAfterSeconds: 60, Metered: true}}
		for _, g := range h200.GPUs {
			ug := gpuuse.GPU{GPU: g.UUID, Index: g.Index}
			for k, sh := range shares {
				if sh.node != h200.Name || sh.sh.UUID != g.UUID {
					continue
				}
				busy, mem := int64(100+53*k), int64(1+k)*1024
				ug.Shares = append(ug.Shares, gpuuse.Share{Workload: sh.pod, GPU: g.UUID, Index: g.Index,
					Booked: gpuuse.Booked{GuaranteedMilli: sh.sh.ComputeMilli, LimitMilli: sh.sh.ComputeLimitMilli, MemoryMiB: sh.sh.MemoryMiB, MemoryLimitMiB: sh.sh.MemoryLimitMiB},
					Use:    gpuuse.Use{Source: gpuuse.Measured, BusyMilli: &busy, From: at.Add(-10 * time.Second), At: at, MemoryUsedMiB: &mem}})
			}
			ug.Sum("no pod holds it")
			st.GPUs = append(st.GPUs, ug)
		}
		if err := (&agentkube.UsePublisher{Core: client, Dynamic: dyn, Node: h200.Name}).Publish(ctx, st); err != nil {
			t.Fatal(err)
		}
		published[h200.Name] = st
	}
	// stepAgent runs the A100 node's agent to t0+at, which publishes then
	// (every 10 s from t0+1s).
	stepAgent := func(at time.Duration) nodeuse.Status {
		t.Helper()
		st := agent.stepTo(ctx, t, t0.Add(at))
		if !st.At.Equal(t0.Add(at)) {
			t.Fatalf("the agent last published at %v, want t0+%v", st.At.Sub(t0), at)
		}
		published[a100.Name] = st
		return st
	}
	stepAgent(11 * time.Second) // the first use window closed at t0+11s

	const wait = 30 * time.Second
	poll := func(what, expr string) { t.Helper(); b.Poll(what, expr, wait) }
	eval := func(what, expr string) []string { t.Helper(); return b.Strings(what, expr, wait) }
	// read returns the text of each selector's element in one script run:
	// the page redraws at every update, so the texts are of one drawing.
	read := func(sels ...string) []string {
		t.Helper()
		js, err := json.Marshal(sels)
		if err != nil {
			t.Fatal(err)
		}
		return eval("read", fmt.Sprintf(`%s.map(s => { const e = document.querySelector(s); return e ? e.textContent.trim() : '(missing)'; })`, js))
	}
	text := func(sel string) string {
		t.Helper()
		return read(sel)[0]
	}

	b.Do("open the page", wait, chromedp.Navigate(srv.URL+"/"))
	poll("the first snapshot", `Number(document.body.dataset.updates) >= 1`)
	poll("the charts", `Number(document.getElementById('chart-alloc').dataset.points) >= 3`)
	poll("the waiting pod's reason", fmt.Sprintf(`(() => { const td = document.querySelector('#pending tr[data-job="default/too-big"] td.reason'); return td && td.textContent === %q && document.querySelector('#card-running .value').textContent === %q; })()`, reason, strconv.Itoa(running)))

	// Overview: the cards are the API's counts and sums.
	if got := text("#card-running .value"); got != strconv.Itoa(running) {
		t.Errorf("running card %q, want %d (pods bound in the API)", got, running)
	}
	if got := text("#card-waiting .value"); got != "1" {
		t.Errorf("waiting card %q, want 1", got)
	}
	if got, want := text("#card-guaranteed .value"), quantity.FormatShare(guaranteed)+" / "+strconv.Itoa(gpus); got != want {
		t.Errorf("guaranteed card %q, want %q (the pods' assignments over %d GPUs)", got, want, gpus)
	}
	// Fragmentation: the simulator's measure against the typical pods the
	// default policy learned from the pods it placed, as the scheduler's
	// view has it.
	if view.Typical == 0 {
		t.Error("the default policy learned no typical pods from the pods it placed")
	} else {
		var free int64
		for _, n := range view.Nodes {
			for _, g := range n.GPUs {
				free += g.FreeMilli
			}
		}
		want := quantity.FormatShare(int64(math.Round(view.FragmentationMilli))) + " / " + quantity.FormatShare(free)
		if got := text("#card-fragmented .value"); got != want {
			t.Errorf("fragmented card %q, want %q (placement.ClusterFragmentation in the scheduler's view)", got, want)
		}
	}
	if got := text("#card-gpus .value"); got != strconv.Itoa(gpus) {
		t.Errorf("GPUs card %q, want %d", got, gpus)
	}
	if got := text(`#pending tr[data-job="default/too-big"] td.reason`); got != reason {
		t.Errorf("the page says too-big waits because %q; its PodScheduled condition says %q", got, reason)
	}
	for _, q := range []string{"research", "prod", "default"} {
		used := text(fmt.Sprintf(`#queues tr[data-queue=%q] td:nth-child(6)`, q))
		if want := quantity.FormatShare(usedBy[q]) + " GPU"; !strings.HasPrefix(used, want) {
			t.Errorf("queue %s uses %q, want %s (its pods' assignments)", q, used, want)
		}
		if got, want := text(fmt.Sprintf(`#queues tr[data-queue=%q] td.share`, q)), strconv.FormatFloat(shareOfQueue[q], 'f', 2, 64); got != want {
			t.Errorf("queue %s fair share %q, want %s (the scheduler's ledger)", q, got, want)
		}
	}
	notes := strings.Join(eval("notes", `Array.from(document.querySelectorAll('#notes .note')).map(n => n.textContent)`), "\n")
	for _, want := range []string{"over 10s windows", "1 node(s) publish no GPU use", "gpu-l4-0", "gpu-h200-0 GPU 3"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// Use: each queue's published use beside its guarantee, the total
	// measured (the simulated node's figures are not measured).
	var measured, simulated int64
	for _, g := range published[h200.Name].GPUs {
		if g.Use.BusyMilli != nil {
			measured += *g.Use.BusyMilli
		}
	}
	for _, g := range published[a100.Name].GPUs {
		if g.Use.BusyMilli != nil {
			simulated += *g.Use.BusyMilli
		}
	}
	poll("the published use", fmt.Sprintf(`document.querySelector('#card-measured .value').textContent === %q`,
		quantity.FormatShare(measured)+" measured + "+quantity.FormatShare(simulated)+" simulated"))
	var sels, wants []string
	for _, q := range view.Queues {
		var meas, sim int64
		var anyMeas, anySim bool
		for _, st := range published {
			for _, g := range st.GPUs {
				for _, sh := range g.Shares {
					if queueOf[sh.Workload] != q.Name {
						continue
					}
					if sh.Use.Source == gpuuse.Measured {
						meas, anyMeas = meas+*sh.Use.BusyMilli, true
					} else {
						sim, anySim = sim+*sh.Use.BusyMilli, true
					}
				}
			}
		}
		var parts []string
		if anyMeas {
			parts = append(parts, quantity.FormatShare(meas)+" measured")
		}
		if anySim {
			parts = append(parts, quantity.FormatShare(sim)+" simulated")
		}
		want := strings.Join(parts, " + ")
		switch {
		case q.Running == 0:
			want = "–"
		case len(parts) == 0:
			want = "not metered"
		case len(parts) == 1 && q.Guaranteed.GPUMilli > 0:
			want += fmt.Sprintf(" (%d%% of guarantee)", int64(math.Round(100*float64(meas+sim)/float64(q.Guaranteed.GPUMilli))))
		}
		sels = append(sels, fmt.Sprintf(`#queues tr[data-queue=%q] td.measured`, q.Name))
		wants = append(wants, want)
	}
	for i, got := range read(sels...) {
		if got != wants[i] {
			t.Errorf("%s shows %q, want %q (the published use of its pods)", sels[i], got, wants[i])
		}
	}
	b.DocScreenshot("overview", "dashboard-cluster-overview.png")

	// GPUs: every share of the API on its GPU, with its fraction and limit.
	b.Do("open the GPU view", wait, chromedp.Click(chromedp.ID("tab-gpus"), chromedp.NodeVisible))
	sels, wants = nil, nil
	for _, sh := range shares {
		row := fmt.Sprintf(`.gpu[data-gpu="%s/%d"] tr.share-row[data-job=%q]`, sh.node, sh.sh.Index, sh.pod)
		sels = append(sels, row+" td.guaranteed", row+" td.limit")
		wants = append(wants, quantity.FormatShare(sh.sh.ComputeMilli), quantity.FormatShare(sh.sh.ComputeLimitMilli))
	}
	for node, n := range podsOn {
		sels = append(sels, fmt.Sprintf(`#nodes tr[data-node=%q] td.pods`, node))
		wants = append(wants, strconv.Itoa(n))
	}
	for i, got := range read(sels...) {
		if got != wants[i] {
			t.Errorf("%s shows %q, want %s (the API's)", sels[i], got, wants[i])
		}
	}
	if got := text(`.gpu[data-gpu="gpu-h200-0/3"] .health`); !strings.Contains(got, "Unhealthy") {
		t.Errorf("GPU 3 of gpu-h200-0 health %q, want Unhealthy", got)
	}
	// Use beside booking: each share's published busy fraction (labelled
	// measured or simulated), memory in use, no idle mark yet; each GPU's
	// the agent's sum; the L4 node's says why nothing measures it.
	checkUse := func(idleText string) {
		t.Helper()
		sels, wants = nil, nil
		for name, st := range published {
			for _, g := range st.GPUs {
				card := fmt.Sprintf(`.gpu[data-gpu="%s/%d"]`, name, g.Index)
				sels = append(sels, card+" .use-text")
				wants = append(wants, "used "+useWords(g.Use))
				for _, sh := range g.Shares {
					row := fmt.Sprintf(`%s tr.share-row[data-job=%q]`, card, sh.Workload)
					idle := "–"
					if sh.Idle != nil {
						idle = idleText
					}
					sels = append(sels, row+" td.measured", row+" td.used", row+" td.idle")
					wants = append(wants, useWords(sh.Use), quantity.FormatMiB(*sh.Use.MemoryUsedMiB), idle)
				}
			}
		}
		sels = append(sels, `.gpu[data-node="gpu-l4-0"] tr.share-row td.measured`)
		wants = append(wants, "not metered: the node's agent publishes no use (no GPUUse gpu-l4-0)")
		for i, got := range read(sels...) {
			if got != wants[i] {
				t.Errorf("%s shows %q, want %q (what the agent published)", sels[i], got, wants[i])
			}
		}
	}
	// The agent's metrics (tessera_container_gpu_busy_ratio and _idle, as
	// a scrape reads them at the instant it published) say what the page
	// says.
	checkMetrics := func() {
		t.Helper()
		m := agent.busy(t)
		for _, g := range published[a100.Name].GPUs {
			for _, sh := range g.Shares {
				want := [2]float64{float64(*sh.Use.BusyMilli) / 1000, 0}
				if sh.Idle != nil {
					want[1] = 1
				}
				if got, ok := m[[2]string{sh.Workload, g.GPU}]; !ok || got != want {
					t.Errorf("the agent's metrics for %s on %s: busy and idle %v (found %v), the page and GPUUse %v", sh.Workload, g.GPU, got, ok, want)
				}
			}
		}
	}
	// synced waits until the page draws the agent's publication at t0+at:
	// the scheduler's informer holds it and the page drew two views since.
	synced := func(at time.Duration) {
		t.Helper()
		testcluster.Eventually(t, "the scheduler's view holds the publication", wait, func() error {
			v, _ := s.View()
			if st := v.Use[a100.Name]; !st.At.Equal(t0.Add(at)) {
				return fmt.Errorf("%s's use published at t0+%v, want t0+%v", a100.Name, st.At.Sub(t0), at)
			}
			return nil
		})
		n := eval("updates", `[document.body.dataset.updates]`)
		poll("two views drawn since", fmt.Sprintf(`Number(document.body.dataset.updates) >= %s + 2`, n[0]))
	}
	idleMarks := func() []string {
		t.Helper()
		return eval("idle marks", `Array.from(document.querySelectorAll('tr.share-row')).filter(r => r.querySelector('td.idle') && r.querySelector('td.idle').textContent !== '–').map(r => r.dataset.job + ': ' + r.querySelector('td.idle').textContent)`)
	}
	checkUse("")
	checkMetrics()
	// infer-2 has stayed below the threshold since t0+1s: not an idle
	// holder at t0+51s (50 s), one at t0+61s (the idle time), flagged in
	// the page, the agent's metrics and GPUUse alike, and nothing else is.
	stepAgent(51 * time.Second)
	synced(51 * time.Second)
	if got := idleMarks(); len(got) != 0 {
		t.Errorf("idle marks at t0+51s, before the idle time: %q", got)
	}
	checkUse("")
	checkMetrics()
	st := stepAgent(61 * time.Second)
	synced(61 * time.Second)
	since := t0.Add(time.Second)
	idleText := "idle since " + since.Format("15:04:05")
	if got, want := idleMarks(), []string{idler + ": " + idleText}; !slices.Equal(got, want) {
		t.Errorf("idle marks at t0+61s: %q, want %q", got, want)
	}
	for _, g := range st.GPUs {
		for _, sh := range g.Shares {
			if (sh.Idle != nil) != (sh.Workload == idler) || sh.Idle != nil && !sh.Idle.Since.Equal(since) {
				t.Errorf("GPUUse at t0+61s: %s idle %+v, want only %s idle since t0+1s", sh.Workload, sh.Idle, idler)
			}
		}
	}
	checkUse(idleText)
	checkMetrics()
	// The documentation's picture: the simulated node's use beside its
	// bookings, with the idle mark.
	b.Do("pick gpu-a100-0", wait, chromedp.Click(chromedp.CSS(`#nodes a[data-node="gpu-a100-0"]`), chromedp.NodeVisible))
	// Each card holds its share table whole (no column cut off or scrolled)
	// in the documentation's window.
	if got := eval("cards narrower than their tables", `Array.from(document.querySelectorAll('#gpu-list .gpu')).filter(g => g.scrollWidth > g.clientWidth).map(g => g.dataset.gpu + ': ' + g.scrollWidth + ' > ' + g.clientWidth)`); len(got) != 0 {
		t.Errorf("GPU cards whose tables do not fit: %q", got)
	}
	b.DocScreenshot("gpus", "dashboard-cluster-gpus.png")
	// A node's link in the nodes table shows only that node's GPUs.
	b.Do("pick gpu-l4-0", wait, chromedp.Click(chromedp.CSS(`#nodes a[data-node="gpu-l4-0"]`), chromedp.NodeVisible))
	if got := eval("GPU cards shown", `Array.from(document.querySelectorAll('#gpu-list .gpu')).map(g => g.dataset.gpu)`); !slices.Equal(got, []string{"gpu-l4-0/0", "gpu-l4-0/1"}) {
		t.Errorf("GPU cards after picking gpu-l4-0: %v, want its two GPUs", got)
	}
	if got, want := text("#gpu-count"), "2 GPUs on gpu-l4-0, of "+strconv.Itoa(gpus); got != want {
		t.Errorf("the GPU count says %q, want %q", got, want)
	}

	// Workloads: every pod, the waiting one with its reason.
	b.Do("open the workload list", wait, chromedp.Click(chromedp.ID("tab-workloads"), chromedp.NodeVisible))
	got := eval("workload rows", `Array.from(document.querySelectorAll('#workloads tbody tr[data-job]')).map(r => r.dataset.job)`)
	var want []string
	for _, p := range pods.Items {
		want = append(want, "default/"+p.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("workloads %v, want the API's pods %v", got, want)
	}
	if got := text(`#workloads tr[data-job="default/too-big"] td.reason`); got != reason {
		t.Errorf("the list says too-big waits because %q, want %q", got, reason)
	}
	// Where each running pod runs: its node, GPU and share (each holds one),
	// and what it used there as its agent published it (none on the L4
	// node, which has no agent).
	usedOn := map[[2]string]gpuuse.Use{}
	for _, st := range published {
		for _, g := range st.GPUs {
			for _, u := range g.Shares {
				usedOn[[2]string{u.Workload, g.GPU}] = u.Use
			}
		}
	}
	sels, wants = nil, nil
	for _, sh := range shares {
		w := fmt.Sprintf("%s GPU %d: %s", sh.node, sh.sh.Index, quantity.FormatShare(sh.sh.ComputeMilli))
		if sh.sh.ComputeLimitMilli > sh.sh.ComputeMilli {
			w += " (limit " + quantity.FormatShare(sh.sh.ComputeLimitMilli) + ")"
		}
		if u, ok := usedOn[[2]string{sh.pod, sh.sh.UUID}]; ok && u.BusyMilli != nil {
			w += ", used " + useWords(u)
		}
		sels = append(sels, fmt.Sprintf(`#workloads tr[data-job=%q] td.gpus`, sh.pod))
		wants = append(wants, w)
	}
	for i, got := range read(sels...) {
		if got != wants[i] {
			t.Errorf("%s shows %q, want %s (the pod's assignment)", sels[i], got, wants[i])
		}
	}
	// Only the idle holder carries the idle badge in the list.
	badges := eval("idle badges", `Array.from(document.querySelectorAll('#workloads tr[data-job] .badge.idle')).map(b => b.closest('tr').dataset.job + ': ' + b.textContent)`)
	if !slices.Equal(badges, []string{idler + ": " + idleText}) {
		t.Errorf("idle badges in the workload list %q, want only %s: %s", badges, idler, idleText)
	}
	b.Screenshot("workloads")
	b.CheckConsole()
	// Leave the page: its event stream would hold srv.Close.
	b.Do("leave", wait, chromedp.Navigate("about:blank"))
}

// useWords is a use figure as the page words it: "0.42 measured", "0.3
// simulated", or why nothing measures it.
func useWords(u gpuuse.Use) string {
	if u.BusyMilli == nil {
		return u.Reason
	}
	return quantity.FormatShare(*u.BusyMilli) + " " + string(u.Source)
}

// gpuNode creates a KWOK node and its GPUNode object (as the agent
// publishes it) with count GPUs of model, changed by mut.
func gpuNode(ctx context.Context, t *testing.T, c kubernetes.Interface, dyn dynamic.Interface, name, model string, count int, mut func(*inventory.Node)) inventory.Node {
	t.Helper()
	m, err := catalog.Default().Resolve(model)
	if err != nil {
		t.Fatal(err)
	}
	createNode(ctx, t, c, name, nil, count)
	in := inventory.Node{Name: name, Source: "nvml"}
	for i := range count {
		in.GPUs = append(in.GPUs, inventory.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Index: i, Model: m.Name, Product: m.Name,
			Vendor: string(m.Vendor), MemoryMiB: m.MemoryMiB, SMCount: m.SMCount, NUMANode: -1, Health: inventory.Healthy, MIGMode: inventory.MIGDisabled})
	}
	if mut != nil {
		mut(&in)
	}
	if _, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(in, 8, gpunode.SharingShared), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return in
}

// labelNode creates a KWOK node whose GPUs are described by labels only.
func labelNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name, model string, count int) {
	t.Helper()
	createNode(ctx, t, c, name, map[string]string{nodeinventory.LabelModel: model, nodeinventory.LabelCount: strconv.Itoa(count)}, count)
}

func createNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels map[string]string, gpus int) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), workload.ResourceGPU: resource.MustParse(strconv.Itoa(8 * gpus))}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createPod creates a pod asking for gpus (a whole number, or one with
// the fraction annotations in ann) in queue; load, when set, is the
// simulated load its container declares (simulated.LoadEnv).
func createPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, queue, gpus string, ann map[string]string, load string) {
	t.Helper()
	var labels map[string]string
	if queue != "" {
		labels = map[string]string{queues.LabelQueue: queue}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{SchedulerName: scheduler.DefaultName, Containers: []corev1.Container{{
			Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
				Limits:   corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)},
			},
		}}},
	}
	if load != "" {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: simulated.LoadEnv, Value: load}}
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createQueue(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tessera.io/v1alpha1", "kind": "Queue", "metadata": map[string]any{"name": name}, "spec": spec}}
	if _, err := dyn.Resource(queues.Resource()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func countBound(ctx context.Context, c kubernetes.Interface, want int) error {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d pods bound, want %d", n, want)
	}
	return nil
}
