package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/store"
)

// Server answers the local API for one daemon.
type Server struct {
	d   *hostd.Daemon
	log *slog.Logger
}

// Handler returns the API, metrics and status page handler.
func Handler(d *hostd.Daemon, log *slog.Logger) (http.Handler, error) {
	s := &Server{d: d, log: log}
	metrics, err := metricsHandler(d)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
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
	mux.HandleFunc("GET /{$}", s.page)
	return mux, nil
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

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "decode submission: " + err.Error()})
		return
	}
	j, err := s.d.Submit(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, j)
}

func (s *Server) queues(w http.ResponseWriter, _ *http.Request) {
	qs, err := s.d.Queues()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, qs)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	jobs, err := s.d.Jobs()
	if err != nil {
		s.fail(w, err)
		return
	}
	if jobs == nil {
		jobs = []api.Job{}
	}
	writeJSON(w, http.StatusOK, jobs)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	j, err := s.d.Job(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request) {
	j, err := s.d.Wait(r.Context(), r.PathValue("id"))
	if err != nil {
		if r.Context().Err() != nil {
			// The client went away, or the daemon is shutting down.
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "the daemon is shutting down; ask again"})
			return
		}
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	j, err := s.d.Stop(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) queue(w http.ResponseWriter, _ *http.Request) {
	q, err := s.d.Queue()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	st, err := s.d.Status()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
