package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// logPoll is how often a followed log is re-read for new output.
const logPoll = 50 * time.Millisecond

// logs streams a job's stdout or stderr (?stream=stdout|stderr). With
// ?follow=true it keeps streaming until the job has ended and all its
// output has been sent.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := s.d.Job(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// Output may hold what the environment held: the owner's only.
	if who := callerOf(r.Context()); !s.mayManage(who, j) {
		s.forbidden(w, who, j, "read the output of")
		return
	}
	name := supervisor.StdoutFile
	switch r.URL.Query().Get("stream") {
	case "", "stdout":
	case "stderr":
		name = supervisor.StderrFile
	default:
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "stream: must be stdout or stderr", Field: "stream"})
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	var off int64
	if v := r.URL.Query().Get("offset"); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			writeJSON(w, http.StatusBadRequest, api.Error{Error: "offset: must be a whole number of bytes >= 0", Field: "offset"})
			return
		}
	}
	// Opened beneath the jobs folder, never through a link: a job folder
	// or log replaced by a link is refused, saying so, before anything
	// is sent.
	jobs, rel := filepath.Dir(s.d.JobDir(id)), id+"/"+name
	if err := checkLog(jobs, rel); err != nil {
		s.log.Warn("refused to stream a log", "job", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, api.Error{Error: fmt.Sprintf("the output of %s: %v", id, err)})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Trailer", api.LogCompleteTrailer)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		// The answer has begun: a client timing the daemon's answer
		// stops waiting for one (a quiet job may send nothing for long).
		flusher.Flush()
	}
	t := time.NewTicker(logPoll)
	defer t.Stop()
	for {
		// Read the state first: output written before the job ended is
		// in the file by the time the state says it ended.
		final := j.State.Final()
		n, err := copyFrom(w, jobs, rel, off)
		off += n
		if err != nil {
			s.log.Warn("stream log", "job", id, "err", err)
			return
		}
		if flusher != nil && n > 0 {
			flusher.Flush()
		}
		if !follow || final {
			// Tells the client the stream ended by design, not because
			// the daemon went away.
			w.Header().Set(api.LogCompleteTrailer, "true")
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if j, err = s.d.Job(id); err != nil {
			return
		}
	}
}

// checkLog fails when the log rel under jobs cannot be opened (a missing
// one is fine: the job has not written yet).
func checkLog(jobs, rel string) error {
	f, err := safefs.OpenFile(jobs, rel, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

func copyFrom(w io.Writer, jobs, rel string, off int64) (int64, error) {
	f, err := safefs.OpenFile(jobs, rel, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, f)
}
