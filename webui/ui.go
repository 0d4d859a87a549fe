package webui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// ErrNoState is what a Source's Snapshot error wraps when it has no state
// to show yet (a scheduler before its first cycle, or a replica that is
// not the leader): the UI says so and does not log it as a failure.
var ErrNoState = errors.New("no state to show yet")

// Source gives the UI the state to show.
type Source interface {
	// Snapshot reads the state now. It need not set Totals, Models,
	// Sample or History, nor sort or trim Workloads: the UI does.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Changed returns a channel closed at the next change of the state
	// (nil: the UI refreshes on its timer only).
	Changed() <-chan struct{}
}

// Options configure a UI; zero values take the defaults.
type Options struct {
	// Title heads the page (default "Tessera").
	Title string
	// Scope is "host" or "cluster" (default "host").
	Scope string
	// SampleInterval and HistorySpan size the chart history (defaults
	// DefaultSampleInterval and DefaultHistorySpan).
	SampleInterval, HistorySpan time.Duration
	// Refresh is how often the events stream sends a snapshot when
	// nothing changed, so that measured values move (default 5s).
	Refresh time.Duration
	// MinGap is the least time between two events on one stream: a burst
	// of changes is sent as one (default 250ms).
	MinGap time.Duration
	// MaxFinished bounds the finished workloads a snapshot carries, the
	// newest (default 1000; negative: all).
	MaxFinished int
	// Log receives errors (default slog.Default()).
	Log *slog.Logger
}

// UI serves the dashboard for one Source.
type UI struct {
	src     Source
	o       Options
	history *History
	assets  map[string]asset
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

//go:embed static
var static embed.FS

// New returns the UI of src. Call Run to record its chart history.
func New(src Source, o Options) *UI {
	if o.Title == "" {
		o.Title = "Tessera"
	}
	if o.Scope == "" {
		o.Scope = "host"
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	if o.MinGap <= 0 {
		o.MinGap = 250 * time.Millisecond
	}
	if o.MaxFinished == 0 {
		o.MaxFinished = 1000
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	u := &UI{src: src, o: o, history: NewHistory(o.SampleInterval, o.HistorySpan), assets: map[string]asset{}}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "index.html" {
			continue
		}
		body, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		u.assets[e.Name()] = asset{body: body, contentType: contentType(e.Name()), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return u
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".txt", ".md":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// History is the UI's chart history.
func (u *UI) History() *History { return u.history }

// Register adds the UI's routes (see the package comment) to mux.
func (u *UI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", u.page)
	mux.HandleFunc("GET /ui/static/{name}", u.static)
	mux.HandleFunc("GET /ui/api/snapshot", u.snapshotJSON)
	mux.HandleFunc("GET /ui/api/history", u.historyJSON)
	mux.HandleFunc("GET /ui/api/events", u.events)
}

// Run records a chart sample at once and then every SampleInterval until
// ctx ends.
func (u *UI) Run(ctx context.Context) {
	tick := time.NewTicker(u.history.Interval())
	defer tick.Stop()
	for {
		u.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (u *UI) sample(ctx context.Context) {
	s, err := u.src.Snapshot(ctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrNoState):
			u.o.Log.Debug("web UI: no chart sample this time", "err", err)
		default:
			u.o.Log.Warn("web UI: no chart sample this time", "err", err)
		}
		return
	}
	s.Summarize()
	u.history.Record(SampleOf(s))
}

// Snapshot reads the source and completes the snapshot as the page gets it.
func (u *UI) Snapshot(ctx context.Context) (Snapshot, error) {
	s, err := u.src.Snapshot(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	if s.Scope == "" {
		s.Scope = u.o.Scope
	}
	if s.Title == "" {
		s.Title = u.o.Title
	}
	s.Summarize()
	s.Trim(u.o.MaxFinished)
	s.Sample = SampleOf(s)
	s.History = u.history.Info()
	if s.GPUs == nil {
		s.GPUs = []GPU{}
	}
	for i := range s.GPUs {
		if s.GPUs[i].Shares == nil {
			s.GPUs[i].Shares = []Share{}
		}
	}
	if s.Queues == nil {
		s.Queues = []Queue{}
	}
	if s.Pending == nil {
		s.Pending = []Pending{}
	}
	if s.Workloads == nil {
		s.Workloads = []Workload{}
	}
	return s, nil
}

// securityHeaders keep the page to its own scripts and styles and out of
// frames: it loads nothing from elsewhere.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

var pageTmpl = template.Must(template.ParseFS(static, "static/index.html"))

func (u *UI) page(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	s, err := u.Snapshot(r.Context())
	summary := ""
	if err != nil {
		summary = "could not read the state: " + err.Error()
	} else {
		summary = fmt.Sprintf("%s · %d GPUs · %d running · %d waiting", s.Source, s.Totals.GPUs, s.Totals.Running, s.Totals.Waiting)
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, struct {
		Title, Scope, Summary string
		CSS, JS               string
	}{u.o.Title, u.o.Scope, summary, u.assetURL("app.css"), u.assetURL("app.js")}); err != nil {
		u.o.Log.Warn("web UI page", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// assetURL names an asset with its content hash, so a new binary's page
// never runs an old cached script.
func (u *UI) assetURL(name string) string {
	return "/ui/static/" + name + "?v=" + strings.Trim(u.assets[name].etag, `"`)
}

func (u *UI) static(w http.ResponseWriter, r *http.Request) {
	a, ok := u.assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
}

func (u *UI) snapshotJSON(w http.ResponseWriter, r *http.Request) {
	s, err := u.Snapshot(r.Context())
	if err != nil {
		if errors.Is(err, ErrNoState) {
			writeJSON(w, http.StatusServiceUnavailable, errorBody{err.Error()})
			return
		}
		u.o.Log.Error("web UI snapshot", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// HistoryBody is the answer of /ui/api/history.
type HistoryBody struct {
	HistoryInfo
	Samples []Sample `json:"samples"`
}

func (u *UI) historyJSON(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("since: must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", v)})
			return
		}
		since = t
	}
	writeJSON(w, http.StatusOK, HistoryBody{HistoryInfo: u.history.Info(), Samples: u.history.Since(since)})
}

// events streams snapshots as server-sent events ("snapshot", the JSON of
// Snapshot): one at once, then one after each change the source reports
// (at most one per MinGap) and one every Refresh, until the client leaves.
func (u *UI) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	securityHeaders(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	refresh := time.NewTimer(u.o.Refresh)
	defer refresh.Stop()
	for {
		// Taken before reading: a change while reading is sent next.
		changed := u.src.Changed()
		s, err := u.Snapshot(ctx)
		var data []byte
		event := "snapshot"
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			event, data = "failure", mustJSON(errorBody{err.Error()})
		} else {
			data = mustJSON(s)
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		refresh.Reset(u.o.Refresh)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-refresh.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(u.o.MinGap):
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorBody{err.Error()})
	}
	return b
}
