package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource serves a snapshot that tests change, closing the change
// channel as the daemon does.
type fakeSource struct {
	mu      sync.Mutex
	snap    Snapshot
	err     error
	changed chan struct{}
}

func newFake() *fakeSource {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeSource{changed: make(chan struct{}), snap: Snapshot{
		Source: "sim:2xH200 (simulated)", Time: t0,
		GPUs: []GPU{
			{Node: "n", Index: 0, UUID: "GPU-0", Model: "H200", MemoryMiB: 143771, MemoryBookedMiB: 71885, GuaranteedMilli: 500, LimitMilli: 800,
				Shares: []Share{{Workload: "job-1", Queue: "default", GuaranteedMilli: 500, LimitMilli: 800, MemoryMiB: 71885, MemoryLimitMiB: 71885}}},
			{Node: "n", Index: 1, UUID: "GPU-1", Model: "H200", MemoryMiB: 143771},
		},
		Pending:   []Pending{{Position: 1, ID: "job-2", Queue: "default", Request: "2 GPU", Reason: "waiting for GPU capacity"}},
		Workloads: []Workload{{ID: "job-1", State: StateRunning, Queue: "default", Submitted: t0}, {ID: "job-2", State: StateQueued, Queue: "default", Submitted: t0.Add(time.Second)}},
	}}
}

func (f *fakeSource) Snapshot(context.Context) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.Workloads = append([]Workload(nil), f.snap.Workloads...)
	return s, f.err
}

func (f *fakeSource) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeSource) update(fn func(*Snapshot)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.snap)
	close(f.changed)
	f.changed = make(chan struct{})
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newServer(t *testing.T, src Source, o Options) (*UI, *httptest.Server) {
	t.Helper()
	o.Log = quiet()
	u := New(src, o)
	mux := http.NewServeMux()
	u.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return u, srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestSnapshotEndpoint(t *testing.T) {
	src := newFake()
	u, srv := newServer(t, src, Options{Title: "Tessera host"})
	u.sample(context.Background())
	resp, body := get(t, srv.URL+"/ui/api/snapshot")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("snapshot: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	var s Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Title != "Tessera host" || s.Scope != "host" || s.Totals.GPUs != 2 || s.Totals.GuaranteedMilli != 500 || s.Totals.Running != 1 || s.Totals.Waiting != 1 {
		t.Errorf("snapshot header and totals: %+v", s.Totals)
	}
	if s.Workloads[0].ID != "job-2" {
		t.Errorf("workloads %v: want newest first", s.Workloads)
	}
	if s.Sample.GuaranteedMilli != 500 || len(s.Sample.GPUs) != 2 || s.History.Len != 1 || s.History.Last == nil {
		t.Errorf("sample %+v, history %+v", s.Sample, s.History)
	}
	if s.GPUs[1].Shares == nil || !strings.Contains(body, `"shares":[]`) {
		t.Error("a GPU without shares must carry an empty list, not null")
	}

	src.mu.Lock()
	src.err = errors.New("database closed")
	src.mu.Unlock()
	if resp, body := get(t, srv.URL+"/ui/api/snapshot"); resp.StatusCode != 500 || !strings.Contains(body, "database closed") {
		t.Errorf("failing source: %d %s", resp.StatusCode, body)
	}
}

func TestHistoryEndpoint(t *testing.T) {
	src := newFake()
	u, srv := newServer(t, src, Options{SampleInterval: time.Second, HistorySpan: time.Hour})
	t0 := src.snap.Time
	for i := range 3 {
		u.History().Record(Sample{Time: t0.Add(time.Duration(i) * time.Second), Running: i})
	}
	var h HistoryBody
	_, body := get(t, srv.URL+"/ui/api/history")
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Samples) != 3 || h.IntervalSeconds != 1 || h.SpanSeconds != 3600 || h.Len != 3 {
		t.Errorf("history %+v", h)
	}
	_, body = get(t, srv.URL+"/ui/api/history?since="+t0.Format(time.RFC3339Nano))
	h = HistoryBody{}
	if err := json.Unmarshal([]byte(body), &h); err != nil || len(h.Samples) != 2 || h.Samples[0].Running != 1 {
		t.Errorf("history since the first sample: %+v, %v", h.Samples, err)
	}
	if resp, body := get(t, srv.URL+"/ui/api/history?since=yesterday"); resp.StatusCode != 400 || !strings.Contains(body, "RFC 3339") {
		t.Errorf("bad since: %d %s", resp.StatusCode, body)
	}
}

func TestRunRecordsSamples(t *testing.T) {
	src := newFake()
	u := New(src, Options{SampleInterval: 10 * time.Millisecond, Log: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	// Each sample needs a later time: the fake's clock moves on.
	deadline := time.Now().Add(10 * time.Second)
	for u.History().Info().Len < 3 && time.Now().Before(deadline) {
		src.update(func(s *Snapshot) { s.Time = s.Time.Add(time.Second) })
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if n := u.History().Info().Len; n < 3 {
		t.Errorf("%d samples recorded, want at least 3", n)
	}
}

func TestPageAndAssets(t *testing.T) {
	src := newFake()
	_, srv := newServer(t, src, Options{Title: "Tessera host"})
	resp, body := get(t, srv.URL+"/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"<title>Tessera host</title>", "sim:2xH200 (simulated) · 2 GPUs · 1 running · 1 waiting", `/ui/static/app.js?v=`, `/ui/static/app.css?v=`, `id="chart-alloc"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("the page names another site: it must load nothing from elsewhere")
	}
	for name, ct := range map[string]string{"app.js": "text/javascript", "app.css": "text/css"} {
		resp, body := get(t, srv.URL+"/ui/static/"+name)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(body) < 1000 || resp.Header.Get("ETag") == "" {
			t.Errorf("%s: %d %s, %d bytes, ETag %q", name, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), resp.Header.Get("ETag"))
		}
		if strings.Contains(body, "https://") {
			t.Errorf("%s fetches from another site", name)
		}
		req, _ := http.NewRequest("GET", srv.URL+"/ui/static/"+name, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", name, r2.StatusCode)
		}
	}
	for _, path := range []string{"/ui/static/index.html", "/ui/static/nope.js", "/ui/nope"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", srv.URL+"/ui/api/snapshot", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to the read-only UI: %v, %v", resp.StatusCode, err)
	}
}

// readEvent reads one server-sent event (its name and data).
func readEvent(t *testing.T, r *bufio.Reader) (string, string) {
	t.Helper()
	var name, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("events stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestEvents(t *testing.T) {
	src := newFake()
	_, srv := newServer(t, src, Options{Refresh: time.Hour, MinGap: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	name, data := readEvent(t, r)
	var s Snapshot
	if err := json.Unmarshal([]byte(data), &s); name != "snapshot" || err != nil || s.Totals.Waiting != 1 {
		t.Fatalf("first event %s %v: %+v", name, err, s.Totals)
	}
	// A change is sent at once, not at the next refresh (an hour away).
	src.update(func(s *Snapshot) {
		s.Pending = append(s.Pending, Pending{Position: 2, ID: "job-3", Reason: "behind job-2"})
		s.Workloads = append(s.Workloads, Workload{ID: "job-3", State: StateQueued, Submitted: s.Time.Add(2 * time.Second)})
	})
	name, data = readEvent(t, r)
	s = Snapshot{}
	if err := json.Unmarshal([]byte(data), &s); name != "snapshot" || err != nil || s.Totals.Waiting != 2 || s.Workloads[0].ID != "job-3" {
		t.Fatalf("event after a change %s %v: %+v %v", name, err, s.Totals, s.Workloads)
	}
	// A failing read is an event the page shows, and the stream goes on.
	src.mu.Lock()
	src.err = errors.New("store closed")
	src.mu.Unlock()
	src.update(func(*Snapshot) {})
	if name, data = readEvent(t, r); name != "failure" || !strings.Contains(data, "store closed") {
		t.Errorf("event after a failed read: %s %s", name, data)
	}
}

// An empty host is empty lists, never null (the page maps over them), and
// HEAD on the event stream answers at once.
func TestEmptyAndHead(t *testing.T) {
	src := newFake()
	src.snap = Snapshot{Source: "none"}
	_, srv := newServer(t, src, Options{})
	_, body := get(t, srv.URL+"/ui/api/snapshot")
	for _, key := range []string{`"models":[]`, `"gpus":[]`, `"queues":[]`, `"pending":[]`, `"workloads":[]`} {
		if !strings.Contains(body, key) {
			t.Errorf("empty snapshot lacks %s: %s", key, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, srv.URL+"/ui/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("HEAD events: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestClusterSnapshot: a cluster's nodes get their GPUs' count and
// capacity from the GPUs (what a stale count said is replaced), a source
// without state yet answers 503 and says why (and no sample is taken), and
// beyond MaxSampledGPUs a sample keeps the totals but not each GPU.
func TestClusterSnapshot(t *testing.T) {
	src := newFake()
	src.snap.Scope = "cluster"
	src.snap.Nodes = []Node{{Name: "n", Ready: true, GPUs: 7}, {Name: "empty"}}
	u, srv := newServer(t, src, Options{Scope: "cluster"})
	s, err := u.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Nodes[0]; n.GPUs != 2 || n.GPU.CapacityMilli != 2000 || n.GPU.GuaranteedMilli != 500 || n.GPU.LimitMilli != 800 || n.GPU.MemoryBookedMiB != 71885 {
		t.Errorf("node n: %+v", n)
	}
	if n := s.Nodes[1]; n.GPUs != 0 || n.GPU.CapacityMilli != 0 {
		t.Errorf("node without GPUs: %+v", n)
	}
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, `data-scope="cluster"`) || !strings.Contains(page, "scheduler") {
		t.Errorf("the page does not name its scope:\n%s", page)
	}

	src.mu.Lock()
	src.err = fmt.Errorf("no cycle yet: %w", ErrNoState)
	src.mu.Unlock()
	if resp, body := get(t, srv.URL+"/ui/api/snapshot"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no cycle yet") {
		t.Errorf("no state: %d %s, want 503 saying why", resp.StatusCode, body)
	}
	u.sample(context.Background())
	if n := u.History().Info().Len; n != 0 {
		t.Errorf("%d samples without state, want none", n)
	}

	big := Snapshot{}
	for i := range MaxSampledGPUs + 1 {
		big.GPUs = append(big.GPUs, GPU{Node: "n", Index: i, GuaranteedMilli: 250})
	}
	big.Summarize()
	if sm := SampleOf(big); sm.GPUs != nil || sm.GuaranteedMilli != 250*int64(MaxSampledGPUs+1) || sm.CapacityMilli != 1000*int64(MaxSampledGPUs+1) {
		t.Errorf("sample of %d GPUs: %d per-GPU values, guaranteed %d", MaxSampledGPUs+1, len(sm.GPUs), sm.GuaranteedMilli)
	}
	big.GPUs = big.GPUs[:MaxSampledGPUs]
	big.Summarize()
	if sm := SampleOf(big); len(sm.GPUs) != MaxSampledGPUs {
		t.Errorf("sample of %d GPUs: %d per-GPU values, want each", MaxSampledGPUs, len(sm.GPUs))
	}
}
