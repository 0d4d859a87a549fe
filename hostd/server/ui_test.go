package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/webui"
)

// uiHost is a host daemon wired as tessera up wires it (simulated GPUs,
// the node arbiter, this test binary as every job's supervisor: see
// TestMain), running, behind the API on its socket and on a loopback TCP
// port with the API token, as tessera up --http serves it.
type uiHost struct {
	d           *hostd.Daemon
	arb         *arbiter.Arbiter
	state, sock string
	tcp, token  string
	gates       string
}

func startUIHost(t *testing.T, spec string, sample time.Duration, clk *clocktesting.FakeClock) *uiHost {
	t.Helper()
	cat, source, nodes := simulatedHost(t, spec)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	capacity := map[string]uint64{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			capacity[g.UUID] = uint64(g.MemoryMiB) << 20
		}
	}
	// The simulated meter, as tessera up runs it on simulated GPUs, with
	// short windows so that a use figure shows within the test; or, on a
	// step clock (clk), the daemon's defaults (10 s use windows, idle
	// below 0.05 of a GPU for a minute), the arbiter stepped by the test.
	jobs := &hostd.JobTree{}
	acfg := arbiter.Config{Mode: arbiter.ModeTokens, Capacity: capacity, Logger: log,
		Meter: &hostd.SimMeter{Jobs: jobs, Log: log}, MeterWindow: 100 * time.Millisecond, UseWindow: 200 * time.Millisecond}
	var now func() time.Time
	if clk != nil {
		now, jobs.Now = clk.Now, clk.Now
		var mono uint64
		acfg.Clock, acfg.Mono = clk, func() (uint64, error) { mono += uint64(time.Second); return mono, nil }
		acfg.Period, acfg.StaleAfter, acfg.MeterWindow, acfg.UseWindow = time.Second, time.Hour, 0, 10*time.Second
		acfg.Idle = gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}
		acfg.Meter = &hostd.SimMeter{Jobs: jobs, Now: clk.Now, Log: log}
	}
	arb, err := arbiter.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &uiHost{arb: arb}
	top := t.TempDir()
	h.state, h.gates = filepath.Join(top, "state"), filepath.Join(top, "gates")
	h.sock = filepath.Join(h.state, "tessera.sock")
	if err := os.Mkdir(h.gates, 0o700); err != nil {
		t.Fatal(err)
	}
	h.d, err = hostd.New(hostd.Config{
		StateDir: h.state, Source: source, Simulated: true, Nodes: nodes, Catalog: cat,
		Supervisor: []string{os.Args[0]}, StopGrace: 5 * time.Second, PollInterval: 20 * time.Millisecond,
		Arbiter: hostd.ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}, Log: log}, Log: log, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs.Set(h.d)
	if _, err := PrepareSocketDir(h.state, h.sock, 0o600); err != nil {
		t.Fatal(err)
	}
	token, path, _, err := EnsureToken(h.state)
	if err != nil {
		t.Fatal(err)
	}
	h.token = token
	handler, err := Handler(h.d, Options{Log: log, Token: token, TokenFile: path, UISampleInterval: sample})
	if err != nil {
		t.Fatal(err)
	}
	ul, err := ListenUnix(h.sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.tcp = tl.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: handler, ConnContext: ConnContext, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ul) }()
	go func() { _ = srv.Serve(tl) }()
	arbDone, runDone := make(chan struct{}), make(chan struct{})
	if clk == nil {
		go func() { defer close(arbDone); _ = arb.Run(ctx) }()
	} else { // the test steps it
		close(arbDone)
	}
	go func() { defer close(runDone); _ = h.d.Run(ctx) }()
	t.Cleanup(func() {
		// The jobs end once their gate folder is gone (see job); the
		// daemon is stopped only once it has seen them end, so no
		// supervisor still writes into the state folder when the test's
		// temporary folder is removed.
		_ = os.RemoveAll(h.gates)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			jobs, err := h.d.Jobs()
			if err != nil || !slices.ContainsFunc(jobs, func(j api.Job) bool { return j.State == api.Running }) {
				break
			}
		}
		cancel()
		_ = srv.Close()
		<-runDone
		<-arbDone
		_ = h.d.Close()
	})
	return h
}

// job is a submission that runs until the test ends (its gate folder goes).
func (h *uiHost) job(fields map[string]string, queue string, env ...string) api.SubmitRequest {
	return api.SubmitRequest{
		GPU: fields, Queue: queue,
		Command: []string{"/bin/sh", "-c", `while [ -d "$GATES" ]; do sleep 0.2; done`},
		Env:     append([]string{"GATES=" + h.gates, "PATH=/usr/bin:/bin"}, env...),
	}
}

func (h *uiHost) submit(t *testing.T, r api.SubmitRequest) api.Job {
	t.Helper()
	j, err := h.d.Submit(r)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (h *uiHost) waitState(t *testing.T, id string, want api.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := h.d.Job(id)
		if err == nil && j.State == want && (want != api.Running || j.SupervisorPID > 0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s (%v), want %s", id, j.State, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// snapshot reads /ui/api/snapshot over TCP without the token, as a
// browser on this host reads it.
func (h *uiHost) snapshot(t *testing.T) webui.Snapshot {
	t.Helper()
	resp, err := http.Get("http://" + h.tcp + "/ui/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("snapshot: %d %s", resp.StatusCode, body)
	}
	var s webui.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The UI's JSON shows what the daemon's own queries say: each GPU's
// guaranteed booking is 1 - tessera ps --gpus' free fraction, the running
// job sits on its GPU with its share, the waiting job carries tessera
// queue's reason word for word, and no job's environment is shown.
func TestUISnapshotMatchesTheDaemon(t *testing.T) {
	h := startUIHost(t, "2xH200", 0, nil)
	a := h.submit(t, h.job(map[string]string{"compute": "0.5", "compute-limit": "0.8"}, "research", "SECRET=hunter2"))
	h.waitState(t, a.ID, api.Running)
	b := h.submit(t, h.job(map[string]string{"count": "2"}, ""))
	h.waitState(t, b.ID, api.Queued)

	s := h.snapshot(t)
	st, err := h.d.Status()
	if err != nil {
		t.Fatal(err)
	}
	queue, err := h.d.Queue()
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := h.d.Job(a.ID)
	if len(s.GPUs) != len(st.GPUs) || s.Source != "sim:2xH200 (simulated)" || s.Scope != "host" {
		t.Fatalf("snapshot GPUs %d (status %d), source %q", len(s.GPUs), len(st.GPUs), s.Source)
	}
	var holder *webui.GPU
	for i, g := range s.GPUs {
		want := int64(float64(request.Whole)*(1-st.GPUs[i].FreeFraction) + 0.5)
		if g.UUID != st.GPUs[i].UUID || g.GuaranteedMilli != want || g.MemoryBookedMiB != st.GPUs[i].MemoryMiB-st.GPUs[i].FreeMemoryMiB {
			t.Errorf("GPU %d: %+v; status says %+v", i, g, st.GPUs[i])
		}
		if len(g.Shares) > 0 {
			holder = &s.GPUs[i]
		}
	}
	if holder == nil || holder.UUID != ja.Shares[0].UUID || len(holder.Shares) != 1 {
		t.Fatalf("job %s on %+v; want it on %s", a.ID, holder, ja.Shares[0].UUID)
	}
	sh := holder.Shares[0]
	if sh.Workload != a.ID || sh.Queue != "research" || sh.GuaranteedMilli != 500 || sh.LimitMilli != 800 || sh.MemoryLimitMiB != ja.Shares[0].MemoryLimitMiB || holder.LimitMilli != 800 || holder.GuaranteedMilli != 500 {
		t.Errorf("share %+v on a GPU with limit %d; want job %s's 0.5 guaranteed, 0.8 limit", sh, holder.LimitMilli, a.ID)
	}
	if sh.Arbiter == nil || sh.Arbiter.Metered || holder.MeasuredMilli != nil {
		t.Errorf("arbiter seat %+v, measured %v: the job is registered with the node arbiter, not metered on simulated GPUs", sh.Arbiter, holder.MeasuredMilli)
	}
	if len(queue) != 1 || len(s.Pending) != 1 || s.Pending[0].ID != b.ID || s.Pending[0].Reason != queue[0].Reason || s.Pending[0].Request != queue[0].Request || !strings.HasPrefix(queue[0].Reason, "waiting for GPU capacity") {
		t.Errorf("pending %+v; tessera queue says %+v", s.Pending, queue)
	}
	if s.Totals.Running != 1 || s.Totals.Waiting != 1 || s.Totals.GuaranteedMilli != 500 || s.Totals.CapacityMilli != 2000 {
		t.Errorf("totals %+v", s.Totals)
	}
	if len(s.Workloads) != 2 || s.Workloads[0].ID != b.ID || s.Workloads[1].ID != a.ID || s.Workloads[0].Reason != queue[0].Reason {
		t.Errorf("workloads %+v; want %s (newest, with its reason) then %s", s.Workloads, b.ID, a.ID)
	}
	if w := s.Workloads[1]; w.Started == nil || len(w.GPUs) != 1 || w.GPUs[0].GuaranteedMilli != 500 || w.Node == "" {
		t.Errorf("running workload %+v", w)
	}
	var research *webui.Queue
	for i := range s.Queues {
		if s.Queues[i].Name == "research" {
			research = &s.Queues[i]
		}
	}
	if research == nil || research.UsedMilli != 500 || research.Running != 1 {
		t.Errorf("queues %+v; want research using 0.5 GPU", s.Queues)
	}
	if len(s.Notes) == 0 || !strings.Contains(s.Notes[0], "use is simulated") || !strings.Contains(s.Notes[0], "nothing is measured") {
		t.Errorf("notes %q: want it said that use is simulated, not measured", s.Notes)
	}

	// No environment, to anyone: not over TCP without the token, not to
	// the job's owner on the socket.
	for _, c := range []struct {
		name string
		hc   *http.Client
		base string
	}{{"TCP", http.DefaultClient, "http://" + h.tcp}, {"socket", unixHTTP(h.sock), "http://tessera"}} {
		for _, path := range []string{"/ui/api/snapshot", "/ui/api/history", "/"} {
			resp, err := c.hc.Get(c.base + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "GATES=") {
				t.Errorf("%s %s: %d, environment shown: %.300s", c.name, path, resp.StatusCode, body)
			}
		}
	}
}

// The UI is behind the API's guard: a rebound Host or a cross-site Origin
// is refused, and it answers no method but GET.
func TestUIGuarded(t *testing.T) {
	h := startUIHost(t, "1xH200", 0, nil)
	_, port, _ := net.SplitHostPort(h.tcp)
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"page", "GET", "/", nil, 200},
		{"page by localhost", "GET", "/", map[string]string{"Host": "localhost:" + port}, 200},
		{"snapshot, rebound Host", "GET", "/ui/api/snapshot", map[string]string{"Host": "evil.example:" + port}, 403},
		{"events, rebound Host", "GET", "/ui/api/events", map[string]string{"Host": "evil.example:" + port}, 403},
		{"snapshot, cross-site Origin", "GET", "/ui/api/snapshot", map[string]string{"Origin": "http://evil.example"}, 403},
		{"script, cross-site Origin", "GET", "/ui/static/app.js", map[string]string{"Origin": "http://evil.example"}, 403},
		{"POST without the token", "POST", "/ui/api/snapshot", nil, 401},
		{"POST with the token", "POST", "/ui/api/snapshot", map[string]string{"Authorization": "Bearer " + h.token}, 405},
		{"DELETE with the token", "DELETE", "/", map[string]string{"Authorization": "Bearer " + h.token}, 405},
	} {
		req, err := http.NewRequest(tc.method, "http://"+h.tcp+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s %s answered %d, want %d", tc.name, tc.method, tc.path, resp.StatusCode, tc.want)
		}
		if tc.want == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: no Content-Security-Policy", tc.name)
		}
	}
}

// hostSnapshot's bookkeeping, from the daemon's answers.
func TestHostSnapshot(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	started := t0.Add(time.Second)
	lib := "/usr/local/lib/tessera/libtessera-intercept.so"
	busyA, busy1, busy2 := int64(420), int64(410), int64(10)
	sharesOf := func(uuid string, idx int, c, l int64) []binding.Share {
		return []binding.Share{{UUID: uuid, Index: idx, ComputeMilli: c, ComputeLimitMilli: l, MemoryMiB: 1000, MemoryLimitMiB: 2000}}
	}
	in := hostState{
		Now: t0.Add(time.Minute),
		Status: api.Status{Source: "local", Sharing: "shared", GPUs: []api.GPUStatus{
			{Node: "h", Index: 0, UUID: "GPU-a", Model: "H100", MemoryMiB: 8000, FreeMemoryMiB: 5000, FreeFraction: 0.25,
				Use: &gpuuse.Use{Source: gpuuse.Measured, BusyMilli: &busyA}, Shares: []gpuuse.Share{
					{Workload: "job-1", GPU: "GPU-a", Use: gpuuse.Use{Source: gpuuse.Measured, BusyMilli: &busy1}},
					{Workload: "job-2", GPU: "GPU-a", Use: gpuuse.Use{Source: gpuuse.Measured, BusyMilli: &busy2}, Idle: &gpuuse.Idle{Since: t0}},
				}},
			{Node: "h", Index: 1, UUID: "GPU-b", Model: "H100", MemoryMiB: 8000, FreeMemoryMiB: 8000, FreeFraction: 1},
		}},
		Jobs: []api.Job{
			{ID: "job-1", Seq: 1, State: api.Running, Queue: "", GPU: request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 1000}, Submitted: t0, Started: &started, Shares: sharesOf("GPU-a", 0, 500, 1000), InterceptLib: lib, Command: []string{"/bin/train", "--fast"}, Env: []string{"SECRET=x"}},
			{ID: "job-2", Seq: 2, State: api.Running, Queue: "b", GPU: request.GPU{Count: 1, ComputeMilli: 250}, Submitted: t0, Started: &started, Shares: sharesOf("GPU-a", 0, 250, 250)},
			{ID: "job-3", Seq: 3, State: api.Queued, Queue: "b", GPU: request.GPU{Count: 2, ComputeMilli: 1000}, Submitted: t0.Add(2 * time.Second)},
			{ID: "job-4", Seq: 4, State: api.Failed, Queue: "b", Submitted: t0.Add(3 * time.Second), Reason: "exit status 2"},
		},
		Waiting: []api.QueueEntry{{Position: 1, ID: "job-3", Queue: "b", Request: "2 GPU", Reason: "waiting for GPU capacity: needs 2 idle GPUs"}},
		Queues:  []api.QueueStatus{{Name: "b", Weight: 1, Running: 1, Waiting: 1}},
		Arbiter: true, Metered: true,
		Seats: []hostd.SeatUsage{
			{Job: "job-1", GPU: "GPU-a", Phase: "active", GrantedMilli: 700, Metered: true, MemoryBytes: 3 << 30},
			{Job: "job-2", GPU: "GPU-a", Phase: "idle", GrantedMilli: 100, MemoryBytes: 1 << 30},
		},
	}
	s := hostSnapshot(in)
	g := s.GPUs[0]
	if g.GuaranteedMilli != 750 || g.LimitMilli != 1000 || g.MemoryBookedMiB != 3000 || len(g.Shares) != 2 || g.MeasuredMilli == nil || *g.MeasuredMilli != 420 || g.SimulatedMilli != nil {
		t.Errorf("GPU 0: %+v (measured %v); want 0.75 booked, limit capped at 1, measured 0.42 (the measured use, not the arbiter's grant)", g, g.MeasuredMilli)
	}
	if u := g.Shares[0].Use; u == nil || u.Source != gpuuse.Measured || *u.BusyMilli != 410 || g.Shares[0].Idle != nil {
		t.Errorf("job-1's use %+v, want measured 0.41 and not idle", u)
	}
	if g.Shares[1].Idle == nil || !g.Shares[1].Idle.Since.Equal(t0) {
		t.Errorf("job-2's share idle %+v, want idle since %v", g.Shares[1].Idle, t0)
	}
	if sh := g.Shares[0]; sh.Workload != "job-1" || sh.Queue != "default" || sh.MemoryUsedMiB == nil || *sh.MemoryUsedMiB != 3072 || sh.Arbiter == nil || !sh.Arbiter.Metered || sh.Arbiter.GrantedMilli != 700 {
		t.Errorf("job-1's share %+v", sh)
	}
	if sh := g.Shares[1]; sh.MemoryUsedMiB != nil || sh.Arbiter == nil || sh.Arbiter.Phase != "idle" {
		t.Errorf("job-2's share %+v: runs without the interception library, so its memory use is unknown", sh)
	}
	if s.GPUs[1].GuaranteedMilli != 0 || len(s.GPUs[1].Shares) != 0 || s.GPUs[1].MeasuredMilli != nil {
		t.Errorf("idle GPU %+v", s.GPUs[1])
	}
	if len(s.Pending) != 1 || !s.Pending[0].Submitted.Equal(t0.Add(2*time.Second)) {
		t.Errorf("pending %+v: want job-3 with its submission time", s.Pending)
	}
	byID := map[string]webui.Workload{}
	for _, w := range s.Workloads {
		byID[w.ID] = w
	}
	if w := byID["job-3"]; w.Reason != in.Waiting[0].Reason || w.Request != "2 GPU" {
		t.Errorf("job-3 %+v", w)
	}
	if w := byID["job-1"]; w.Request != "1x 0.5 GPU (limit 1)" || w.Command != "train" || w.Node != "h" || len(w.GPUs) != 1 || w.GPUs[0].LimitMilli != 1000 {
		t.Errorf("job-1 %+v", w)
	}
	if byID["job-1"].Idle != nil || byID["job-2"].Idle == nil || !byID["job-2"].Idle.Since.Equal(t0) {
		t.Errorf("idle marks job-1 %+v, job-2 %+v: want job-2 (idle on its one GPU) only", byID["job-1"].Idle, byID["job-2"].Idle)
	}
	if w := byID["job-4"]; w.Reason != "exit status 2" || w.GPUs != nil {
		t.Errorf("job-4 %+v", w)
	}
	if data, _ := json.Marshal(s); strings.Contains(string(data), "SECRET") || strings.Contains(string(data), "--fast") {
		t.Error("the snapshot carries a job's environment or arguments (anyone who reaches the dashboard reads it)")
	}
	if len(s.Notes) != 0 {
		t.Errorf("notes %q with a metered arbiter", s.Notes)
	}
	in.Arbiter, in.Seats = false, nil
	if s := hostSnapshot(in); len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "No node arbiter") || s.GPUs[0].Shares[0].Arbiter != nil {
		t.Errorf("without an arbiter: notes %q", s.Notes)
	}
	in.Arbiter, in.UsageErr = true, errors.New("accounting file torn")
	if s := hostSnapshot(in); len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "accounting file torn") {
		t.Errorf("failed reading: notes %q", s.Notes)
	}
}
