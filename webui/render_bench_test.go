package webui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-gpu/tessera/webui/browsertest"
)

// bigSource is a large host: gpus GPUs, and workloads jobs of which a fifth
// run (one per GPU share of 0.25 until the GPUs are full), the rest wait.
func bigSource(gpus, workloads int) *fakeSource {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := newFake()
	s := Snapshot{Source: "bench", Time: t0.Add(time.Hour)}
	for i := range gpus {
		s.GPUs = append(s.GPUs, GPU{Node: fmt.Sprintf("node-%03d", i/8), Index: i % 8, UUID: fmt.Sprintf("GPU-%04d", i), Model: "H200", MemoryMiB: 143771})
	}
	for i := range workloads {
		id := "job-" + strconv.Itoa(i+1)
		w := Workload{ID: id, Queue: fmt.Sprintf("team-%d", i%7), Request: "1x 0.25 GPU", Submitted: t0.Add(time.Duration(i) * time.Millisecond), Seq: uint64(i + 1),
			Command: "/usr/bin/python3 train.py --epochs 10 --lr 0.001"}
		if g := i / 4; i < workloads/5 && g < gpus {
			started := w.Submitted.Add(time.Second)
			w.State, w.Started, w.Node = StateRunning, &started, s.GPUs[g].Node
			w.GPUs = []WorkloadGPU{{Index: s.GPUs[g].Index, GuaranteedMilli: 250, LimitMilli: 500}}
			s.GPUs[g].Shares = append(s.GPUs[g].Shares, Share{Workload: id, Queue: w.Queue, GuaranteedMilli: 250, LimitMilli: 500, MemoryMiB: 35942, MemoryLimitMiB: 35942})
			s.GPUs[g].GuaranteedMilli += 250
			s.GPUs[g].LimitMilli = min(1000, s.GPUs[g].LimitMilli+500)
			s.GPUs[g].MemoryBookedMiB += 35942
		} else {
			w.State = StateQueued
			w.Reason = "behind job-1 (jobs start in priority order, then submission order; no overtaking)"
			s.Pending = append(s.Pending, Pending{Position: len(s.Pending) + 1, ID: id, Queue: w.Queue, Request: w.Request, Reason: w.Reason, Submitted: w.Submitted})
		}
		s.Workloads = append(s.Workloads, w)
	}
	src.snap = s
	return src
}

// bigCluster is a cluster of nodes nodes with 8 H200s each and workloads
// pods, as the scheduler's cluster view (kube/clusterview) sends it: a
// fifth run (a quarter GPU each, filling the GPUs in order), the rest wait.
func bigCluster(nodes, workloads int) *fakeSource {
	src := bigSource(nodes*8, workloads)
	s := &src.snap
	s.Scope, s.Source = "cluster", "bench cluster"
	running := map[string]int{}
	for _, w := range s.Workloads {
		if w.State == StateRunning {
			running[w.Node]++
		}
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%03d", i)
		s.Nodes = append(s.Nodes, Node{Name: name, Ready: true, Source: "nvml", CPUMilli: 128000, FreeCPUMilli: 128000 - 2000*int64(running[name]),
			MemoryMiB: 1 << 20, FreeMemoryMiB: 1<<20 - 8192*int64(running[name]), Pods: running[name]})
	}
	return src
}

// BenchmarkBrowserRender is the time from opening the page in headless
// Chromium to its first full render of a host with 64 GPUs and 10,000
// workloads (2,000 running, 8,000 waiting); render-ms is the page's own
// time to draw the snapshot, without loading and parsing it. Run it with
//
//	go test -run '^$' -bench 'BrowserRender$' -benchtime 5x ./webui
func BenchmarkBrowserRender(b *testing.B) {
	benchRender(b, bigSource(64, 10000), "host")
}

// BenchmarkBrowserRenderCluster is BenchmarkBrowserRender for the cluster
// view of 1,000 nodes (8,000 GPUs) and 10,000 pods (2,000 running, 8,000
// waiting). Run it with
//
//	go test -run '^$' -bench 'BrowserRenderCluster$' -benchtime 3x ./webui
func BenchmarkBrowserRenderCluster(b *testing.B) {
	benchRender(b, bigCluster(1000, 10000), "cluster")
}

// benchRender opens the page of src in headless Chromium b.N times and
// reports the page's own drawing time (render-ms) and the snapshot's size.
func benchRender(b *testing.B, src *fakeSource, scope string) {
	br := browsertest.New(b)
	u := New(src, Options{Title: "bench", Scope: scope, MaxFinished: -1, Log: quiet()})
	mux := http.NewServeMux()
	u.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var renderMS float64
	for b.Loop() {
		br.Do("open", time.Minute, chromedp.Navigate(srv.URL+"/"))
		ms := browsertest.Run(br, "render", time.Minute, chromedp.Poll[string](`Number(document.body.dataset.updates) >= 1 && document.body.dataset.renderMs`, chromedp.WithPollingInterval(5*time.Millisecond)))
		v, _ := strconv.ParseFloat(ms, 64)
		renderMS += v
	}
	b.ReportMetric(renderMS/float64(b.N), "render-ms")
	snap, err := u.Snapshot(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(mustJSON(snap)))/(1<<20), "snapshot-MB")
	br.CheckConsole()
	// Leave the page: its event stream would hold srv.Close.
	br.Do("leave", time.Minute, chromedp.Navigate("about:blank"))
}
