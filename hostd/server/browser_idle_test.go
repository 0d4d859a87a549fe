package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/chromedp/chromedp"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/webui/browsertest"
)

// The host view flags an idle holder in a real Chromium once its use has
// stayed below the idle threshold for the idle time, and not before: the
// daemon on a step clock from t0 (use windows of 10 s, idle below 0.05 of
// a GPU for a minute), a busy job declaring 0.6 of the GPU and a quiet one
// declaring nothing (below the threshold from the first reading, t0+1s).
// At each step the page's figures are the host API's (StatusUse) at that
// instant, simulated, and its idle marks are the API's: none at t0+51s,
// the quiet job's from t0+61s, in the GPU view and the workload list.
func TestBrowserHostIdleHolder(t *testing.T) {
	b := browsertest.New(t)
	t0 := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(t0) // the daemon's, the arbiter's and the simulated meter's
	h := startUIHost(t, "1xH200", 250*time.Millisecond, clk)
	busy := h.submit(t, h.job(map[string]string{"compute": "0.5", "memory": "4Gi"}, "", "TESSERA_SIM_LOAD=busy=0.6,memory=2Gi"))
	quiet := h.submit(t, h.job(map[string]string{"compute": "0.25"}, ""))
	h.waitState(t, busy.ID, api.Running)
	h.waitState(t, quiet.ID, api.Running)

	const wait = 30 * time.Second
	poll := func(what, expr string) { t.Helper(); b.Poll(what, expr, wait) }
	eval := func(what, expr string) []string { t.Helper(); return b.Strings(what, expr, wait) }
	// stepTo runs the arbiter once a second to t0+at, then waits until the
	// page drew two updates since (each a fresh read of the daemon), and
	// returns the host API's use at that instant.
	stepTo := func(at time.Duration) api.Status {
		t.Helper()
		for clk.Now().Before(t0.Add(at)) {
			clk.Step(time.Second)
			if err := h.arb.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		n := eval("updates", `[document.body.dataset.updates]`)
		poll("two updates drawn", fmt.Sprintf(`Number(document.body.dataset.updates) >= %s + 2`, n[0]))
		st, err := h.d.StatusUse(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// check compares each job's row with the API's share record.
	check := func(when string, st api.Status) {
		t.Helper()
		var sels, wants []string
		for _, sh := range st.GPUs[0].Shares {
			row := fmt.Sprintf(`.gpu[data-index="0"] tr.share-row[data-job=%q]`, sh.Workload)
			idle := "–"
			if sh.Idle != nil {
				idle = "idle since " + sh.Idle.Since.Format("15:04:05")
			}
			sels = append(sels, row+" td.measured", row+" td.idle")
			wants = append(wants, quantity.FormatShare(*sh.Use.BusyMilli)+" "+string(sh.Use.Source), idle)
		}
		js, err := json.Marshal(sels)
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range eval("read the rows", fmt.Sprintf(`%s.map(s => { const e = document.querySelector(s); return e ? e.textContent.trim() : '(missing)'; })`, js)) {
			if got != wants[i] {
				t.Errorf("%s: %s shows %q, the host API %q", when, sels[i], got, wants[i])
			}
		}
	}

	b.Do("open the page", wait, chromedp.Navigate("http://"+h.tcp+"/"))
	poll("the first snapshot", `Number(document.body.dataset.updates) >= 1`)
	b.Do("open the GPU view", wait, chromedp.Click(chromedp.ID("tab-gpus"), chromedp.NodeVisible))

	st := stepTo(11 * time.Second) // the first use window closed
	if len(st.GPUs) == 0 || len(st.GPUs[0].Shares) != 2 {
		t.Fatalf("host API use at t0+11s: %+v, want the two jobs on GPU 0", st.GPUs)
	}
	for _, sh := range st.GPUs[0].Shares {
		want := map[string]int64{busy.ID: 600, quiet.ID: 0}[sh.Workload]
		if sh.Use.Source != gpuuse.Simulated || sh.Use.BusyMilli == nil || *sh.Use.BusyMilli != want || sh.Idle != nil {
			t.Fatalf("host API use of %s at t0+11s: %+v idle %+v, want simulated %d and not idle", sh.Workload, sh.Use, sh.Idle, want)
		}
	}
	check("t0+11s", st)
	st = stepTo(51 * time.Second)
	if got := eval("idle marks", `Array.from(document.querySelectorAll('td.idle .badge.idle')).map(b => b.textContent)`); len(got) != 0 {
		t.Errorf("idle marks at t0+51s, before the idle time: %q", got)
	}
	check("t0+51s", st)
	st = stepTo(61 * time.Second)
	want := quiet.ID + ": idle since " + t0.Add(time.Second).Format("15:04:05")
	if got := eval("idle marks", `Array.from(document.querySelectorAll('tr.share-row')).filter(r => r.querySelector('td.idle .badge.idle')).map(r => r.dataset.job + ': ' + r.querySelector('td.idle').textContent)`); !slices.Equal(got, []string{want}) {
		t.Errorf("idle marks at t0+61s: %q, want only %q", got, want)
	}
	check("t0+61s", st)
	b.Do("open the workload list", wait, chromedp.Click(chromedp.ID("tab-workloads"), chromedp.NodeVisible))
	if got := eval("idle badges", `Array.from(document.querySelectorAll('#workloads tr[data-job] .badge.idle')).map(b => b.closest('tr').dataset.job + ': ' + b.textContent)`); !slices.Equal(got, []string{want}) {
		t.Errorf("idle badges in the workload list %q, want only %q", got, want)
	}
	b.CheckConsole()
}
