package server

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/webui/browsertest"
)

// The host view in a real headless Chromium: a daemon on eight simulated
// H200s with a finished job, a running one and one that waits; the page
// shows the running job on its GPU with its share, the waiting job's
// reason as tessera queue gives it, the workloads newest first, the charts
// with data, and a job submitted meanwhile (over TCP with the API token,
// as tessera run --addr does) appears without a reload. The page writes no
// error to the console. Without chromium this test skips, unless
// TESSERA_REQUIRE_BROWSER is set (.ci/run sets it): then it fails.
func TestBrowserHostView(t *testing.T) {
	b := browsertest.New(t)
	h := startUIHost(t, "8xH200", 250*time.Millisecond, nil)

	done := h.submit(t, api.SubmitRequest{GPU: map[string]string{"compute": "0.25"}, Command: []string{"/bin/true"}})
	h.waitState(t, done.ID, api.Succeeded)
	running := h.submit(t, h.job(map[string]string{"compute": "0.5", "compute-limit": "0.8", "memory": "40Gi", "memory-limit": "60Gi"}, "research", "TESSERA_SIM_LOAD=busy=0.3,memory=8Gi"))
	h.waitState(t, running.ID, api.Running)
	waiting := h.submit(t, h.job(map[string]string{"count": "8"}, ""))
	h.waitState(t, waiting.ID, api.Queued)

	queue, err := h.d.Queue()
	if err != nil || len(queue) != 1 || queue[0].ID != waiting.ID {
		t.Fatalf("tessera queue: %+v, %v", queue, err)
	}
	rj, err := h.d.Job(running.ID)
	if err != nil || len(rj.Shares) != 1 {
		t.Fatalf("running job: %+v, %v", rj, err)
	}
	gpu := rj.Shares[0].Index

	const wait = 30 * time.Second
	poll := func(what, expr string) { t.Helper(); b.Poll(what, expr, wait) }
	text := func(sel string) string {
		t.Helper()
		return strings.TrimSpace(browsertest.Run(b, "read "+sel, wait, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible)))
	}
	eval := func(what, expr string) []string { t.Helper(); return b.Strings(what, expr, wait) }

	b.Do("open the page", wait, chromedp.Navigate("http://"+h.tcp+"/"))
	poll("the first snapshot", `Number(document.body.dataset.updates) >= 1`)

	// Overview: the totals, the waiting job with tessera queue's reason.
	if got := text("#card-running .value"); got != "1" {
		t.Errorf("running card shows %q, want 1", got)
	}
	if got := text("#card-waiting .value"); got != "1" {
		t.Errorf("waiting card shows %q, want 1", got)
	}
	if got := text("#card-guaranteed .value"); got != "0.5 / 8" {
		t.Errorf("guaranteed card shows %q, want 0.5 / 8", got)
	}
	// Fragmentation: the simulator's measure against the jobs the policy
	// has seen, as the daemon reports it.
	if milli, free, shapes := h.d.Fragmentation(); shapes == 0 {
		t.Error("the daemon's policy has seen no typical jobs after three submissions")
	} else if got, want := text("#card-fragmented .value"), quantity.FormatShare(int64(math.Round(milli)))+" / "+quantity.FormatShare(free); got != want {
		t.Errorf("fragmented card shows %q, want %q (Daemon.Fragmentation)", got, want)
	}
	if got := text(fmt.Sprintf(`#pending tr[data-job=%q] td.reason`, waiting.ID)); got != queue[0].Reason {
		t.Errorf("the page says %s waits because %q; tessera queue says %q", waiting.ID, got, queue[0].Reason)
	}
	if got := text(`#queues tr[data-queue="research"] td.share`); got == "" {
		t.Error("no fair share shown for queue research")
	}
	// The charts: the history (a sample every 250 ms) and the live point.
	poll("chart samples", `Number(document.getElementById('chart-alloc').dataset.points) >= 3 && Number(document.getElementById('chart-jobs').dataset.points) >= 3`)
	paths := eval("chart paths", `Array.from(document.querySelectorAll('#chart-alloc path[data-series], #chart-jobs path[data-series]')).filter(p => /L/.test(p.getAttribute('d'))).map(p => p.dataset.series)`)
	for _, s := range []string{"capacity", "guaranteed", "burst", "running", "waiting"} {
		if !slices.Contains(paths, s) {
			t.Errorf("charts draw %v, want a %s line", paths, s)
		}
	}
	b.DocScreenshot("overview", "dashboard-host-overview.png")

	// GPUs -> shares: the running job on its GPU with its share.
	b.Do("open the GPU view", wait, chromedp.Click(chromedp.ID("tab-gpus"), chromedp.NodeVisible))
	row := fmt.Sprintf(`.gpu[data-index="%d"] tr.share-row[data-job=%q]`, gpu, running.ID)
	if got := text(row + " td.guaranteed"); got != "0.5" {
		t.Errorf("%s's guaranteed share on GPU %d shows %q, want 0.5", running.ID, gpu, got)
	}
	if got := text(row + " td.limit"); got != "0.8" {
		t.Errorf("%s's burst limit shows %q, want 0.8", running.ID, got)
	}
	if got := text(row + " td.mem"); got != "40Gi / cap 60Gi" {
		t.Errorf("%s's memory shows %q, want 40Gi / cap 60Gi", running.ID, got)
	}
	// Use beside booking: the job's declared load, labelled simulated
	// (never measured), the same figure the host API gives.
	poll("a simulated use figure", fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === '0.3 simulated'`, row+" td.measured"))
	if got := text(row + " td.used"); got != "8Gi" {
		t.Errorf("%s's memory used shows %q, want 8Gi (its declared load)", running.ID, got)
	}
	if got := text(fmt.Sprintf(`.gpu[data-index="%d"] .use-text`, gpu)); got != "used 0.3 simulated" {
		t.Errorf("GPU %d's use reads %q, want used 0.3 simulated", gpu, got)
	}
	if st, err := h.d.StatusUse(t.Context()); err != nil {
		t.Fatal(err)
	} else if u := st.GPUs[gpu].Use; u == nil || u.Source != "simulated" || u.BusyMilli == nil || *u.BusyMilli != 300 {
		t.Errorf("the host API says GPU %d's use is %+v; the page says 0.3 simulated", gpu, u)
	}
	if got := eval("figures labelled measured", `Array.from(document.querySelectorAll('td.measured, .use-text, #card-measured .value')).map(e => e.textContent).filter(s => /measured/.test(s))`); len(got) != 0 {
		t.Errorf("simulated GPUs show %q as measured", got)
	}
	if got := text(fmt.Sprintf(`.gpu[data-index="%d"] .compute-text`, gpu)); !strings.Contains(got, "guaranteed 0.5 of 1") || !strings.Contains(got, "burst limit 0.8") {
		t.Errorf("GPU %d says %q", gpu, got)
	}
	if got := eval("GPUs with shares", `Array.from(document.querySelectorAll('.gpu')).filter(g => g.querySelector('tr.share-row')).map(g => g.dataset.index)`); !slices.Equal(got, []string{fmt.Sprint(gpu)}) {
		t.Errorf("GPUs with shares %v, want only %d", got, gpu)
	}
	b.Screenshot("gpus")

	// Workloads: newest and live first, timestamps, durations, filters.
	b.Do("open the workload list", wait, chromedp.Click(chromedp.ID("tab-workloads"), chromedp.NodeVisible))
	order := func() []string {
		return eval("workload order", `Array.from(document.querySelectorAll('#workloads tbody tr[data-job]')).map(r => r.dataset.job)`)
	}
	if got, want := order(), []string{waiting.ID, running.ID, done.ID}; !slices.Equal(got, want) {
		t.Errorf("workload list %v, want %v (live first, newest first)", got, want)
	}
	if got := text(fmt.Sprintf(`#workloads tr[data-job=%q] td.reason`, waiting.ID)); got != queue[0].Reason {
		t.Errorf("the list says %s waits because %q, want %q", waiting.ID, got, queue[0].Reason)
	}
	stamp := regexp.MustCompile(`^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d$`)
	if got := text(fmt.Sprintf(`#workloads tr[data-job=%q] td.time`, running.ID)); !stamp.MatchString(got) {
		t.Errorf("submitted at %q, want a time", got)
	}
	if got := text(fmt.Sprintf(`#workloads tr[data-job=%q] td.dur`, running.ID)); !strings.HasPrefix(got, "running ") {
		t.Errorf("duration %q, want running ...", got)
	}
	if got := text(fmt.Sprintf(`#workloads tr[data-job=%q] td.dur`, done.ID)); !strings.HasPrefix(got, "ran ") {
		t.Errorf("duration of the finished job %q, want ran ...", got)
	}
	// Job IDs stay on one line: their text makes one line box.
	if got := eval("ID cells that wrap", `Array.from(document.querySelectorAll('#workloads td.id')).filter(td => { const r = document.createRange(); r.selectNodeContents(td); return getComputedStyle(td).whiteSpace !== 'nowrap' || r.getClientRects().length !== 1; }).map(td => td.textContent)`); len(got) != 0 {
		t.Errorf("job IDs that wrap: %v", got)
	}
	filter := func(id, value string) {
		t.Helper()
		b.Do("filter "+id, wait, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event('change')); })()`, id, value)))
	}
	filter("filter-state", "running")
	if got := order(); !slices.Equal(got, []string{running.ID}) {
		t.Errorf("state running: %v", got)
	}
	filter("filter-state", "")
	filter("filter-queue", "default")
	if got := order(); !slices.Equal(got, []string{waiting.ID, done.ID}) {
		t.Errorf("queue default: %v", got)
	}
	filter("filter-queue", "")
	// The jobs that run or ran on the running job's GPU, by the daemon's records.
	var onGPU []string
	for _, id := range []string{waiting.ID, running.ID, done.ID} {
		j, err := h.d.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Queued && slices.ContainsFunc(j.Shares, func(s binding.Share) bool { return s.Index == gpu }) {
			onGPU = append(onGPU, id)
		}
	}
	filter("filter-gpu", fmt.Sprintf("%s/%d", nodeName(t, h), gpu))
	if got := order(); !slices.Equal(got, onGPU) {
		t.Errorf("GPU %d: %v, want %v", gpu, got, onGPU)
	}
	filter("filter-gpu", "")
	b.Screenshot("workloads")

	// A live update: a job submitted now shows up, running, at the top,
	// and the page was not reloaded (the mark set on it survives).
	b.Do("mark the page", wait, chromedp.Evaluate[chromedp.Void](`window.tesseraMark = 'same page'`))
	body := `{"gpu":{"compute":"0.25"},"queue":"research","command":["/bin/sh","-c","while [ -d \"$GATES\" ]; do sleep 0.2; done"],"env":["GATES=` + h.gates + `","PATH=/usr/bin:/bin"]}`
	req, _ := http.NewRequest("POST", "http://"+h.tcp+"/v1/jobs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var late api.Job
	if resp.StatusCode != 201 || json.Unmarshal(out, &late) != nil {
		t.Fatalf("submit over TCP: %d %s", resp.StatusCode, out)
	}
	poll("the new job at the top", fmt.Sprintf(`(() => { const r = document.querySelector('#workloads tbody tr[data-job]'); return r && r.dataset.job === %q; })()`, late.ID))
	if got := browsertest.Run(b, "the mark", wait, chromedp.Evaluate[string](`window.tesseraMark || 'reloaded'`)); got != "same page" {
		t.Errorf("the page was reloaded (mark %q)", got)
	}
	// It waits behind the 8-GPU job (the default queue, using less, goes
	// first, and nothing overtakes it): the page says so as tessera queue does.
	h.waitState(t, late.ID, api.Queued)
	queue, err = h.d.Queue()
	if err != nil || len(queue) != 2 || queue[1].ID != late.ID {
		t.Fatalf("tessera queue after the submission: %+v, %v", queue, err)
	}
	poll("the new job's reason", fmt.Sprintf(`(() => { const td = document.querySelector('#workloads tr[data-job=%q] td.reason'); return td && td.textContent === %q; })()`, late.ID, queue[1].Reason))
	b.Do("back to the overview", wait, chromedp.Click(chromedp.ID("tab-overview"), chromedp.NodeVisible))
	poll("the waiting card", `document.querySelector('#card-waiting .value').textContent === '2'`)
	if got := text(fmt.Sprintf(`#pending tr[data-job=%q] td.reason`, late.ID)); got != queue[1].Reason {
		t.Errorf("the page says %s waits because %q; tessera queue says %q", late.ID, got, queue[1].Reason)
	}
	b.Screenshot("overview-after-submit")
	b.CheckConsole()
}

// nodeName is the name of the host's (only) node, as the GPU filter keys it.
func nodeName(t *testing.T, h *uiHost) string {
	t.Helper()
	st, err := h.d.Status()
	if err != nil || len(st.GPUs) == 0 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	return st.GPUs[0].Node
}
