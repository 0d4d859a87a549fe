package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/store"
	"github.com/tessera-gpu/tessera/webui"
)

// Options configure the API handler.
type Options struct {
	// Log receives errors (default slog.Default()).
	Log *slog.Logger
	// Token is the API token that callers over TCP (--http) must send to
	// submit or stop jobs, and that makes them the daemon's user; "" lets
	// TCP callers only read.
	Token string
	// TokenFile is where the token is kept, named in 401 answers.
	TokenFile string
	// DaemonUID is the daemon's uid (nil: this process's). Callers with
	// it, and root, may see and stop every job.
	DaemonUID *uint32
	// UISampleInterval is how often the web UI records a chart sample
	// (0: webui.DefaultSampleInterval, 10s, kept for webui.DefaultHistorySpan).
	UISampleInterval time.Duration
}

// Server answers the local API for one daemon.
type Server struct {
	d         *hostd.Daemon
	log       *slog.Logger
	token     string
	tokenFile string
	uid       uint32
	// nonces are the outstanding challenges of the proof exchange.
	nonces *nonces
}

// Handler returns the API, metrics and web UI handler, behind the guard
// (see Server.guard). Serve it with ConnContext as the http.Server's
// ConnContext. The web UI records its chart history until d is closed.
func Handler(d *hostd.Daemon, o Options) (http.Handler, error) {
	s := &Server{d: d, log: o.Log, token: o.Token, tokenFile: o.TokenFile, uid: uint32(os.Getuid()), nonces: newNonces(time.Now)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if o.DaemonUID != nil {
		s.uid = *o.DaemonUID
	}
	metrics, err := metricsHandler(d)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.ChallengePath, s.challenge)
	mux.HandleFunc("POST /v1/jobs", s.submit)
	mux.HandleFunc("GET /v1/jobs", s.list)
	mux.HandleFunc("GET /v1/jobs/{id}", s.get)
	mux.HandleFunc("GET /v1/jobs/{id}/wait", s.wait)
	mux.HandleFunc("POST /v1/jobs/{id}/stop", s.stop)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", s.logs)
	mux.HandleFunc("GET /v1/queue", s.queue)
	mux.HandleFunc("GET /v1/queues", s.queues)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.Handle("GET /metrics", metrics)
	ui := webui.New(hostSource{d: d, now: time.Now}, webui.Options{
		Title: "Tessera host", Scope: "host", SampleInterval: o.UISampleInterval, Log: s.log,
	})
	ui.Register(mux)
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		<-d.Done()
		stop()
	}()
	go ui.Run(ctx)
	return s.guard(mux), nil
}

// owner is the uid a job belongs to: its submitter, or the daemon's user
// for records older than owners.
func (s *Server) owner(j api.Job) uint32 {
	if j.OwnerUID != nil {
		return *j.OwnerUID
	}
	return s.uid
}

// privileged reports whether c may see and stop every job: the daemon's
// own user, and root.
func (s *Server) privileged(c caller) bool {
	return c.known && (c.uid == s.uid || c.uid == 0)
}

// mayManage reports whether c may see j's whole environment and output
// and stop it: its owner, the daemon's user and root.
func (s *Server) mayManage(c caller, j api.Job) bool {
	return s.privileged(c) || (c.known && c.uid == s.owner(j))
}

// view is j as c may see it (hostd.View): its environment only when
// asked (withEnv) and only to those who may manage it; to anyone else
// only its program's name, no folder.
func (s *Server) view(c caller, j api.Job, withEnv bool) api.Job {
	return hostd.View(j, s.mayManage(c, j), withEnv)
}

// withEnv reports whether the request asks for jobs' environments
// (?env=true; tessera ps --show-env), or says why its value is wrong.
func withEnv(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("env"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("env: must be true or false, got %q", v)
	}
}

// forbidden answers 403 for a caller who may not manage job j.
func (s *Server) forbidden(w http.ResponseWriter, c caller, j api.Job, what string) {
	who := "nobody (over TCP, send the API token to act as the daemon's user)"
	if c.known {
		who = fmt.Sprintf("uid %d", c.uid)
	}
	writeJSON(w, http.StatusForbidden, api.Error{Error: fmt.Sprintf(
		"%s: only its owner (uid %d), the daemon's user (uid %d) or root may %s it; this request is from %s",
		j.ID, s.owner(j), s.uid, what, who)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	var ie *hostd.InputError
	switch {
	case errors.As(err, &ie):
		writeJSON(w, http.StatusBadRequest, api.Error{Error: ie.Msg, Field: ie.Field})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, api.Error{Error: err.Error()})
	case errors.Is(err, hostd.ErrFinished):
		writeJSON(w, http.StatusConflict, api.Error{Error: err.Error()})
	default:
		s.log.Error("api", "err", err)
		writeJSON(w, http.StatusInternalServerError, api.Error{Error: err.Error()})
	}
}

// maxSubmission bounds a submission's body.
const maxSubmission = 4 << 20

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	who := callerOf(r.Context())
	if !who.known {
		writeJSON(w, http.StatusForbidden, api.Error{Error: "submit: the daemon cannot tell which user is connected (over TCP, send the API token)"})
		return
	}
	var req api.SubmitRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSubmission))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil {
		if _, more := dec.Token(); !errors.Is(more, io.EOF) {
			err = errors.New("the body must hold one JSON object, found more after it")
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{Error: fmt.Sprintf("decode submission: larger than %d bytes", maxSubmission)})
			return
		}
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "decode submission: " + err.Error()})
		return
	}
	req.OwnerUID = &who.uid
	j, created, err := s.d.SubmitOnce(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	code := http.StatusCreated
	if !created {
		// A retry of a submission the daemon queued before.
		code = http.StatusOK
	}
	writeJSON(w, code, s.view(who, j, false))
}

func (s *Server) queues(w http.ResponseWriter, _ *http.Request) {
	qs, err := s.d.Queues()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, qs)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	env, err := withEnv(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: err.Error(), Field: "env"})
		return
	}
	jobs, err := s.d.Jobs()
	if err != nil {
		s.fail(w, err)
		return
	}
	who := callerOf(r.Context())
	out := make([]api.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.view(who, j, env))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	env, err := withEnv(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: err.Error(), Field: "env"})
		return
	}
	j, err := s.d.Job(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	who := callerOf(r.Context())
	if env && !s.mayManage(who, j) {
		s.forbidden(w, who, j, "see the environment of")
		return
	}
	writeJSON(w, http.StatusOK, s.view(who, j, env))
}

// wait answers once job id has ended. The answer begins at once, and a
// space (which JSON ignores) follows every api.WaitHeartbeat while the
// job runs, so the client tells a long job from a daemon that stopped
// answering; a wait cut by the daemon's shutdown ends without a job,
// which the client reads as a daemon gone away.
func (s *Server) wait(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.d.Job(id); err != nil {
		s.fail(w, err)
		return
	}
	type result struct {
		j   api.Job
		err error
	}
	done := make(chan result, 1)
	go func() {
		j, err := s.d.Wait(r.Context(), id)
		done <- result{j, err}
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	beat := time.NewTicker(api.WaitHeartbeat)
	defer beat.Stop()
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-beat.C:
			if _, err := io.WriteString(w, " "); err != nil {
				return
			}
		case res := <-done:
			if res.err != nil {
				if r.Context().Err() == nil {
					s.log.Error("api: wait", "job", id, "err", res.err)
				}
				return
			}
			_ = json.NewEncoder(w).Encode(s.view(callerOf(r.Context()), res.j, false))
			return
		}
	}
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := s.d.Job(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// The owner never changes: checking it before stopping is no race.
	who := callerOf(r.Context())
	if !s.mayManage(who, j) {
		s.forbidden(w, who, j, "stop")
		return
	}
	if j, err = s.d.Stop(id); err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(who, j, false))
}

func (s *Server) queue(w http.ResponseWriter, _ *http.Request) {
	q, err := s.d.Queue()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.d.StatusUse(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
